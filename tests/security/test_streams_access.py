"""Streams end with access: the attacks of issue #13 (point 5) against the real stack.

Each worked before: an SSE stream and a WebSocket kept delivering a job's log after
the viewer's token was revoked, they logged out, or were removed from the project;
a reset connection kept its stream slot for an hour; the Origin check looked at the
host name only. The SSE and socket tests run through a real daphne on the test
database and the real Redis channel layer; the signal that ends them is sent from
this process, as a web process would.
"""

import asyncio
import json
import socket
import struct
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import websockets
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from accounts.services import token_issue, token_revoke
from jobs.models import Job
from monitoring.live import slots as stream_slots
from portal.asgi import application
from projects.models import Membership
from tests.helpers import LOG, session_cookie, wait_for
from web.live import consumers, streams
from web.live.consumers import CLOSE_ACCESS_ENDED, CLOSE_FORBIDDEN, CLOSE_TOO_MANY

pytestmark = pytest.mark.django_db(transaction=True)

# Generous on a busy machine; a stream that outlives its access fails on it instead.
TIMEOUT = 30


def _sse_events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event is not None:
            yield event, json.loads(line.removeprefix("data: "))
            event = None


def _follow_until_closed(url: str, headers: dict[str, str], cut: Any) -> list[str]:
    """Open the log stream, call `cut()` once the log arrived; the events until the end."""
    seen: list[str] = []
    timeout = httpx.Timeout(TIMEOUT)
    with httpx.stream("GET", url, headers=headers, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        for event, data in _sse_events(response):
            seen.append(event)
            if event == "log":
                assert data["text"] == LOG.decode()
                cut()
    return seen


def _log_url(server: str, job: Job) -> str:
    return f"{server}/api/v1/jobs/{job.pk}/attempts/1/log/stream"


@pytest.fixture
def clear_slots(member: User) -> Iterator[None]:
    for kind in ("sse", "ws"):
        stream_slots.slots_clear(kind=kind, user_id=member.pk)
    yield
    for kind in ("sse", "ws"):
        stream_slots.slots_clear(kind=kind, user_id=member.pk)


def test_sse_ends_when_its_token_is_revoked(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    issued = token_issue(user=member, name="notebook", scope="read")
    seen = _follow_until_closed(
        _log_url(asgi_server, job),
        {"Authorization": f"Bearer {issued.text}"},
        lambda: token_revoke(user=member, token_id=issued.token.pk),
    )
    assert seen[0] == "log" and seen[-1] == "denied"
    # Nothing more with it, and its slot came back.
    again = httpx.get(
        _log_url(asgi_server, job), headers={"Authorization": f"Bearer {issued.text}"}
    )
    assert again.status_code == 401
    wait_for(lambda: stream_slots.slots_held(kind="sse", user_id=member.pk) == 0, TIMEOUT, "slot")


def test_sse_ends_when_the_viewer_is_removed_from_the_project(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    text = token_issue(user=member, name="notebook", scope="read").text
    seen = _follow_until_closed(
        _log_url(asgi_server, job),
        {"Authorization": f"Bearer {text}"},
        lambda: Membership.objects.filter(user=member, project=job.project).delete(),
    )
    assert seen[-1] == "denied"


def test_sse_of_a_browser_session_ends_at_logout(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    session = session_cookie(member)
    browser = Client()
    browser.cookies[settings.SESSION_COOKIE_NAME] = session
    seen = _follow_until_closed(
        _log_url(asgi_server, job),
        {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"},
        lambda: browser.post("/logout/"),
    )
    assert seen[-1] == "denied"


def test_a_reset_connection_gives_its_slot_back(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    text = token_issue(user=member, name="notebook", scope="read").text
    port = int(asgi_server.rsplit(":", 1)[1])
    for _ in range(streams.OPEN_STREAMS_PER_USER + 2):  # more than the cap: each came back
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as raw:
            raw.sendall(
                f"GET /api/v1/jobs/{job.pk}/attempts/1/log/stream HTTP/1.1\r\n"
                f"Host: 127.0.0.1:{port}\r\nAuthorization: Bearer {text}\r\n\r\n".encode()
            )
            assert raw.recv(4096).startswith(b"HTTP/1.1 200")
            # Close with a reset (RST), not a goodbye: linger on, zero seconds.
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        wait_for(
            lambda: stream_slots.slots_held(kind="sse", user_id=member.pk) == 0,
            TIMEOUT,
            "the reset stream's slot to come back",
        )


def test_an_unnoticed_end_costs_a_slot_only_until_its_lease_ends(
    member: User, clear_slots: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = streams.OPEN_STREAMS_PER_USER
    held = [stream_slots.slot_take(kind="sse", user_id=member.pk, cap=cap) for _ in range(cap)]
    assert None not in held  # taken, never given back: a process killed mid-stream
    assert stream_slots.slot_take(kind="sse", user_id=member.pk, cap=cap) is None
    later = stream_slots.time.time() + stream_slots.SLOT_LEASE_SECONDS + 1
    monkeypatch.setattr(stream_slots.time, "time", lambda: later)
    assert stream_slots.slot_take(kind="sse", user_id=member.pk, cap=cap) is not None
    # A lapsed lease is not renewed: its stream ends and reconnects.
    assert not stream_slots.slot_renew(kind="sse", user_id=member.pk, slot=str(held[0]))


# --- WebSockets through daphne ------------------------------------------------------------


def _ws_until_closed(server: str, job: Job, session: str, cut: Any) -> tuple[str, int]:
    """Connect, read the hello, `cut()`; the hello's event and the close code."""

    async def scenario() -> tuple[str, int]:
        url = server.replace("http://", "ws://") + f"/ws/jobs/{job.pk}/"
        async with websockets.connect(
            url,
            origin=websockets.Origin(server),
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"},
            open_timeout=TIMEOUT,
        ) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            await asyncio.to_thread(cut)
            try:
                while True:  # deltas may come first; the close must come
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None
                return hello["event"], closed.rcvd.code

    return async_to_sync(scenario)()


def test_websocket_closes_when_the_viewer_is_removed_from_the_project(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    removed = _ws_until_closed(
        asgi_server,
        job,
        session_cookie(member),
        lambda: Membership.objects.filter(user=member, project=job.project).delete(),
    )
    assert removed == ("hello", CLOSE_ACCESS_ENDED)
    wait_for(lambda: stream_slots.slots_held(kind="ws", user_id=member.pk) == 0, TIMEOUT, "slot")


def test_websocket_closes_at_logout(
    asgi_server: str, job: Job, member: User, clear_slots: None
) -> None:
    session = session_cookie(member)
    browser = Client()
    browser.cookies[settings.SESSION_COOKIE_NAME] = session
    closed = _ws_until_closed(asgi_server, job, session, lambda: browser.post("/logout/"))
    assert closed == ("hello", CLOSE_ACCESS_ENDED)


# --- WebSockets in process: the heartbeat, the cap, the Origin ----------------------------


def _communicator(job: Job, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=headers)


def _headers(user: User, origin: bytes = b"http://127.0.0.1:8000") -> list[tuple[bytes, bytes]]:
    cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookie(user)}".encode()
    return [(b"host", b"127.0.0.1:8000"), (b"origin", origin), (b"cookie", cookie)]


def test_the_heartbeat_ends_a_socket_whose_viewer_lost_access_silently(
    job: Job, member: User, clear_slots: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "HEARTBEAT_SECONDS", 0.2)
    headers = _headers(member)

    async def scenario() -> Any:
        communicator = _communicator(job, headers)
        try:
            assert (await communicator.connect(timeout=TIMEOUT))[0]
            assert (await communicator.receive_json_from(timeout=TIMEOUT))["event"] == "hello"
            # No signal: a bulk update, as a script or the admin's action would do it.
            await asyncio.to_thread(
                lambda: User.objects.filter(pk=member.pk).update(is_active=False)
            )
            return await communicator.receive_output(timeout=TIMEOUT)
        finally:
            await communicator.disconnect(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": CLOSE_ACCESS_ENDED}


def test_websockets_per_user_are_capped(
    job: Job, member: User, clear_slots: None, settings: Any
) -> None:
    settings.WEBSOCKETS_PER_USER = 2
    headers = _headers(member)

    async def scenario() -> list[Any]:
        opened = [_communicator(job, headers) for _ in range(3)]
        try:
            return [(await c.connect(timeout=TIMEOUT)) for c in opened]
        finally:
            for c in opened:
                await c.disconnect(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == [(True, None), (True, None), (False, CLOSE_TOO_MANY)]
    # Disconnected: the slots are back.
    assert stream_slots.slots_held(kind="ws", user_id=member.pk) == 0


@pytest.mark.parametrize(
    "origin",
    [
        b"http://127.0.0.1:9999",  # another port of an allowed host
        b"https://127.0.0.1:8000",  # another scheme
        b"http://localhost:8000",  # another allowed host than the one connected to
        b"null",
    ],
)
def test_origin_must_match_scheme_host_and_port(
    job: Job, member: User, clear_slots: None, origin: bytes
) -> None:
    headers = _headers(member, origin)

    async def scenario() -> Any:
        communicator = _communicator(job, headers)
        try:
            answer = await communicator.connect(timeout=TIMEOUT)
            # Refused, the application ends by itself: nothing lingers until the client
            # goes (a consumer would wait in the channel layer's blocking read).
            await asyncio.wait_for(asyncio.shield(communicator.future), TIMEOUT)
            return answer
        finally:
            await communicator.disconnect(timeout=TIMEOUT)

    connected, _ = async_to_sync(scenario)()
    assert not connected
    assert async_to_sync(_own_origin_connects)(job, _headers(member))


async def _own_origin_connects(job: Job, headers: list[tuple[bytes, bytes]]) -> bool:
    communicator = _communicator(job, headers)
    try:
        return bool((await communicator.connect(timeout=TIMEOUT))[0])
    finally:
        await communicator.disconnect(timeout=TIMEOUT)


def test_a_refused_consumer_ends_without_waiting_for_the_client(
    job: Job, outsider: User, clear_slots: None
) -> None:
    headers = _headers(outsider)

    async def scenario() -> Any:
        communicator = _communicator(job, headers)
        try:
            refused = await communicator.connect(timeout=TIMEOUT)
            # Before any disconnect from the client: the application has returned.
            await asyncio.wait_for(asyncio.shield(communicator.future), TIMEOUT)
            return refused
        finally:
            await communicator.disconnect(timeout=TIMEOUT)

    assert async_to_sync(scenario)() == (False, CLOSE_FORBIDDEN)
