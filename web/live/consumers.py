"""The live stream of one job: a `hello` with where its data stands, then deltas.

Deltas are hints (channels-redis drops messages when a channel is full or
stale); the page compares their offsets and steps with what it holds and
backfills any gap over REST. The stream lasts only while its viewer may see the
job: it is checked at every heartbeat and whenever the viewer's access may have
changed (monitoring.live.access), and the socket is closed once it is gone.
"""

import asyncio
import contextlib
import json
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from jobs.access import job_for_viewer
from jobs.poll.open_pages import page_close, page_open, page_renew
from jobs.rundir import job_group
from monitoring.job_page.selectors import job_live_state
from monitoring.live import slots
from monitoring.live.access import StreamViewer, viewer_group, viewer_may_follow
from monitoring.live.slots import slot_give_back, slot_renew, slot_take

# Close codes in the application's own 4xxx range: 4403 "forbidden" (refused at the
# handshake), 4401 "access ended" (logged out, removed), 4429 "too many open".
CLOSE_FORBIDDEN = 4403
CLOSE_ACCESS_ENDED = 4401
CLOSE_TOO_MANY = 4429
HEARTBEAT_SECONDS = 15.0
SLOT_KIND = slots.WEBSOCKET


class JobConsumer(AsyncJsonWebsocketConsumer):
    """`ws/jobs/<job_id>/`: members of the job's project (any role) and staff only."""

    group_name: str | None = None
    viewer: StreamViewer | None = None
    slot: str | None = None
    job_id: int = 0
    ended = False
    _stop: asyncio.Event | None = None
    _watch: "asyncio.Task[None] | None" = None

    async def connect(self) -> None:
        # JobGate let the viewer in and holds their slot (scope["stream_slot"]).
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        self.slot = self.scope["stream_slot"]
        session = self.scope.get("session")
        self.viewer = StreamViewer(
            user_id=self.scope["user"].pk, session_key=getattr(session, "session_key", None)
        )
        # Join, and take the page's lease (polls send only to jobs with one), before reading
        # the state: a delta sent meanwhile arrives after the hello (dispatch is
        # sequential), and one not sent was committed before the state was read.
        self.group_name = job_group(self.job_id)
        await self.channel_layer.group_add(self.group_name, self.channel_name)
        await self.channel_layer.group_add(viewer_group(self.viewer.user_id), self.channel_name)
        await database_sync_to_async(page_open)(job_id=self.job_id, channel=self.channel_name)
        state = await database_sync_to_async(job_live_state)(job_id=self.job_id)
        await self.accept()
        await self.send_json({"event": "hello", **state})
        self._stop = asyncio.Event()
        self._watch = asyncio.create_task(self._heartbeat(self._stop))

    async def _heartbeat(self, stop: asyncio.Event) -> None:
        # Waits on an event, never cancelled: a cancel inside a database call hangs the loop.
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), HEARTBEAT_SECONDS)
            if stop.is_set():
                return
            assert self.viewer is not None and self.slot is not None  # noqa: S101 - set at connect
            renewed = await database_sync_to_async(slot_renew)(
                kind=SLOT_KIND, user_id=self.viewer.user_id, slot=self.slot
            )
            if not renewed or not await self._may_follow():
                await self._end_access()
                return
            await database_sync_to_async(page_renew)(job_id=self.job_id, channel=self.channel_name)

    async def _may_follow(self) -> bool:
        if self.viewer is None:
            return False
        return bool(
            await database_sync_to_async(viewer_may_follow)(viewer=self.viewer, job_id=self.job_id)
        )

    async def disconnect(self, code: int) -> None:
        if self._stop is not None and self._watch is not None:
            self._stop.set()
            await self._watch
            self._stop = self._watch = None
        if self.group_name is not None:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
            await database_sync_to_async(page_close)(job_id=self.job_id, channel=self.channel_name)
            self.group_name = None
        if self.viewer is not None:
            await self.channel_layer.group_discard(
                viewer_group(self.viewer.user_id), self.channel_name
            )
            if self.slot is not None:
                await database_sync_to_async(slot_give_back)(
                    kind=SLOT_KIND, user_id=self.viewer.user_id, slot=self.slot
                )
            self.viewer = self.slot = None

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
        if not self.ended and isinstance(content, dict) and content.get("action") == "ping":
            await self.send_json({"event": "pong"})

    async def job_delta(self, message: dict[str, Any]) -> None:
        """Relay the poller's `job.delta` as `{"event": "delta", ...payload}`."""
        if self.ended:
            return
        payload = {key: value for key, value in message.items() if key not in ("type", "event")}
        await self.send_json({"event": "delta", **payload})

    async def viewer_access_changed(self, message: dict[str, Any]) -> None:
        """`viewer.access_changed`: a logout of this session ends it; anything else, a check."""
        if self.viewer is None:
            return
        ended = message.get("ended_session")
        if (ended is not None and ended == self.viewer.session_key) or not (
            await self._may_follow()
        ):
            await self._end_access()

    async def _end_access(self) -> None:
        """Stop relaying at once and close; the client's disconnect then cleans up."""
        if self.ended:
            return
        self.ended = True
        if self.group_name is not None:
            await self.channel_layer.group_discard(self.group_name, self.channel_name)
            await database_sync_to_async(page_close)(job_id=self.job_id, channel=self.channel_name)
            self.group_name = None
        await self.close(code=CLOSE_ACCESS_ENDED)


class JobGate:
    """The handshake's refusals, before a consumer (and its channel-layer receive) exists.

    A consumer refused in its own connect() sits in channels-redis's blocking receive
    until the client hangs up, and cancelling it there can hang the event loop; here
    a refused socket is closed and done without ever touching the channel layer.
    """

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        user = scope.get("user")
        job_id = int(scope["url_route"]["kwargs"]["job_id"])
        job = await database_sync_to_async(job_for_viewer)(user=user, job_id=job_id)
        if job is None or user is None:
            # Missing and not-yours look the same.
            return await refuse_handshake(receive, send, CLOSE_FORBIDDEN)
        slot = await database_sync_to_async(slot_take)(
            kind=SLOT_KIND, user_id=user.pk, cap=settings.WEBSOCKETS_PER_USER
        )
        if slot is None:
            return await refuse_handshake(receive, send, CLOSE_TOO_MANY)
        try:
            await self.consumer({**scope, "stream_slot": slot}, receive, send)
        finally:
            # Given back by the consumer's disconnect too; this covers a consumer that failed.
            await database_sync_to_async(slot_give_back)(kind=SLOT_KIND, user_id=user.pk, slot=slot)


async def refuse_handshake(receive: Any, send: Any, code: int) -> None:
    """Close a socket at its handshake, before any consumer exists."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": code})
