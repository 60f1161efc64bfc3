"""The live stream of one job: a `hello` with where its data stands, then deltas.

Deltas are hints (channels-redis drops messages when a channel is full or
stale); the page compares their offsets and steps with what it holds and
backfills any gap over REST.
"""

import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from jobs.access import job_for_viewer
from jobs.rundir import job_group
from monitoring.selectors import job_live_state

# Sent as the close code when the handshake is refused; the 4xxx range is the
# application's own, and 4403 reads as "forbidden".
CLOSE_FORBIDDEN = 4403


class JobConsumer(AsyncJsonWebsocketConsumer):
    """`ws/jobs/<job_id>/`: members of the job's project (any role) and staff only."""

    group_name: str | None = None

    async def connect(self) -> None:
        job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        job = await database_sync_to_async(job_for_viewer)(
            user=self.scope.get("user"), job_id=job_id
        )
        if job is None:
            # Refused at the handshake: missing and not-yours look the same.
            await self.close(code=CLOSE_FORBIDDEN)
            return
        # Join before reading the state: a delta sent meanwhile arrives after
        # the hello (dispatch is sequential), so nothing falls between the two.
        self.group_name = job_group(job_id)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        state = await database_sync_to_async(job_live_state)(job_id=job_id)
        await self.accept()
        await self.send_json({"event": "hello", **state})

    async def disconnect(self, code: int) -> None:
        if self.group_name is not None:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
            self.group_name = None

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        # Binary frames and text that is not JSON are ignored, not fatal.
        if text_data is None:
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            return
        await self.receive_json(content, **kwargs)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("action") == "ping":
            await self.send_json({"event": "pong"})

    async def job_delta(self, message: dict[str, Any]) -> None:
        """Relay the poller's `job.delta` as `{"event": "delta", ...payload}`."""
        payload = {key: value for key, value in message.items() if key not in ("type", "event")}
        await self.send_json({"event": "delta", **payload})
