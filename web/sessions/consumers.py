"""`ws/.../sessions/<job>/lab/...`: a session's WebSockets (kernels, terminals), proxied.

The gate refuses before a consumer exists (as web.live.consumers.JobGate does). An open
socket ends when access ends: a logout of its browser session or a removed membership
reaches it through the viewer's group (monitoring.live.access) and it closes at once;
it also checks on its own every ACCESS_CHECK_SECONDS.
"""

import asyncio
import contextlib
import threading
from typing import Any

from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from monitoring.live.access import viewer_group
from sessions.access import opener_may_continue, session_for_opener
from sessions.target import LabTarget, SessionUnavailable, lab_target
from sessions.upstream import portal_cookie_names, request_headers
from sessions.websocket import ClientSocket, WebSocketClosed, open_socket
from web.live.consumers import CLOSE_ACCESS_ENDED, CLOSE_FORBIDDEN, refuse_handshake

ACCESS_CHECK_SECONDS = 15.0
CLOSE_UNAVAILABLE = 4503


def _headers(scope: dict[str, Any], target: LabTarget) -> list[tuple[str, str]]:
    browser = {
        name.decode("latin-1"): value.decode("latin-1")
        for name, value in scope.get("headers", [])
        if not name.lower().startswith(b"sec-websocket-")
    }
    return request_headers(browser, target=target, portal=portal_cookie_names())


def _path(scope: dict[str, Any]) -> str:
    query = scope.get("query_string", b"").decode("latin-1")
    raw = scope.get("raw_path") or scope["path"].encode()
    return raw.decode("latin-1") + (f"?{query}" if query else "")


class LabSocket(AsyncWebsocketConsumer):
    upstream: ClientSocket | None = None
    ended = False
    _stop: asyncio.Event | None = None
    _watch: "asyncio.Task[None] | None" = None

    async def connect(self) -> None:
        self.job_id = int(self.scope["url_route"]["kwargs"]["job_id"])
        self.user_id = self.scope["user"].pk
        self.session_key = getattr(self.scope.get("session"), "session_key", None)
        target: LabTarget = self.scope["lab_target"]
        try:
            self.upstream = await sync_to_async(open_socket, thread_sensitive=False)(
                target=target,
                path=_path(self.scope),
                headers=_headers(self.scope, target),
                subprotocols=list(self.scope.get("subprotocols") or []),
                max_bytes=settings.SESSION_WS_MESSAGE_MAX_BYTES,
            )
        except SessionUnavailable:
            await self.close(code=CLOSE_UNAVAILABLE)
            return
        await self.channel_layer.group_add(viewer_group(self.user_id), self.channel_name)
        await self.accept(subprotocol=self.upstream.subprotocol)
        loop = asyncio.get_running_loop()
        threading.Thread(target=self._relay_down, args=(loop, self.upstream), daemon=True).start()
        self._stop = asyncio.Event()
        self._watch = asyncio.create_task(self._checks(self._stop))

    def _relay_down(self, loop: asyncio.AbstractEventLoop, upstream: ClientSocket) -> None:
        """The session's messages to the browser, in order, one at a time (back-pressure)."""
        code = 1000
        while True:
            try:
                message = upstream.receive()
            except WebSocketClosed as closed:
                code = closed.code
                break
            except OSError:
                code = 1011
                break
            sent = (
                self.send(text_data=message.data.decode(errors="replace"))
                if message.text
                else self.send(bytes_data=message.data)
            )
            try:
                asyncio.run_coroutine_threadsafe(sent, loop).result()
            except Exception:
                break
        upstream.close()
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(self._end(code if code < 4000 else 1000), loop)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.upstream is None or self.ended:
            return
        data = text_data.encode() if text_data is not None else (bytes_data or b"")
        if len(data) > settings.SESSION_WS_MESSAGE_MAX_BYTES:
            await self._end(1009)
            return
        try:
            await sync_to_async(self.upstream.send, thread_sensitive=False)(
                data, text=text_data is not None
            )
        except (OSError, WebSocketClosed):
            await self._end(1011)

    async def _checks(self, stop: asyncio.Event) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), ACCESS_CHECK_SECONDS)
            if stop.is_set():
                return
            if not await self._may_continue():
                await self._end(CLOSE_ACCESS_ENDED)
                return

    async def _may_continue(self) -> bool:
        return bool(
            await database_sync_to_async(opener_may_continue)(
                user_id=self.user_id, session_key=self.session_key, job_id=self.job_id
            )
        )

    async def viewer_access_changed(self, message: dict[str, Any]) -> None:
        """A logout of this browser session ends the socket; anything else, a check."""
        ended = message.get("ended_session")
        if (ended is not None and ended == self.session_key) or not await self._may_continue():
            await self._end(CLOSE_ACCESS_ENDED)

    async def _end(self, code: int) -> None:
        if self.ended:
            return
        self.ended = True
        if self.upstream is not None:
            await sync_to_async(self.upstream.close, thread_sensitive=False)()
        await self.close(code=code)

    async def disconnect(self, code: int) -> None:
        self.ended = True  # the browser is gone: nothing more is sent to it
        if self._stop is not None and self._watch is not None:
            self._stop.set()
            await self._watch
            self._stop = self._watch = None
        if self.upstream is not None:
            await sync_to_async(self.upstream.close, thread_sensitive=False)()
        await self.channel_layer.group_discard(viewer_group(self.user_id), self.channel_name)


class LabGate:
    """Refuses whoever may not open the session, and finds where it listens, before the
    consumer (and its channel-layer receive) exists."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        user = scope.get("user")
        job_id = int(scope["url_route"]["kwargs"]["job_id"])
        job = await database_sync_to_async(session_for_opener)(user=user, job_id=job_id)
        if job is None:
            return await refuse_handshake(receive, send, CLOSE_FORBIDDEN)
        try:
            target = await database_sync_to_async(lab_target)(job=job)
        except SessionUnavailable:
            return await refuse_handshake(receive, send, CLOSE_UNAVAILABLE)
        await self.consumer({**scope, "lab_target": target}, receive, send)
