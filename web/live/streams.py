"""Live streams for notebooks: a job's log and metrics as server-sent events.

A notebook cannot share the browser's session, so these take the personal
token in the `Authorization: Bearer` header (the session works too). Every
event carries an id that says where the stream stands (the log's byte offset,
or each series' last x); a client that lost its connection sends it back as
`Last-Event-ID` (or `offset` / `after`) and the stream goes on from there, so
nothing is lost or repeated. The database is read every POLL_SECONDS: it is
the truth the poller writes to, whichever web process serves the stream.
"""

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.models import AbstractBaseUser
from django.http import HttpRequest, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from rest_framework import serializers
from rest_framework.exceptions import AuthenticationFailed

from accounts.authentication import IdentityThrottle, bearer_token, token_authenticate
from accounts.models import PersonalToken
from jobs.access import attempt_for_viewer
from jobs.enums import FINAL_STATES
from jobs.models import Attempt
from jobs.rundir import GPU_SERIES_PREFIX
from monitoring.live import slots
from monitoring.live.access import StreamViewer, viewer_may_follow
from monitoring.live.slots import slot_give_back, slot_renew, slot_take
from monitoring.logs.store import LogSlice, log_read
from monitoring.series.read import last_points, series_read
from portal_lib.bounds import BIGINT_MAX
from web.attempts.api import MAX_POINTS_CAP, _log_file_field

POLL_SECONDS = 0.5
HEARTBEAT_SECONDS = 15.0
# A stream ends after this long; the client reconnects with its last event id.
MAX_STREAM_SECONDS = 3600.0
LOG_EVENT_BYTES = 256 * 1024
# Each open stream holds its request's thread and database connection: a bound per user
# (leased slots, monitoring.live.slots, renewed at every heartbeat).
OPEN_STREAMS_PER_USER = 8
SLOT_KIND = slots.SSE
# How often a stream asks again whether its viewer may still follow the job (the token
# live, the session there, still a member): one query beside the four a second it makes.
ACCESS_CHECK_SECONDS = 2.0
# What the event loops yield at each poll: nothing to send, a moment to check the viewer.
TICK = b""


def sse(event: str, data: Any, event_id: str | None = None) -> bytes:
    """One server-sent event; data is JSON, so it is always a single line."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def utf8_complete(data: bytes) -> int:
    """The length of `data` without a UTF-8 character cut off at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)  # ASCII: nothing cut
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)  # only continuation bytes: not UTF-8 anyway


def _error(status: int, detail: Any, **headers: str) -> JsonResponse:
    body = detail if isinstance(detail, dict) else {"detail": detail}
    return JsonResponse(body, status=status, headers=headers)


async def _viewer(request: HttpRequest) -> tuple[AbstractBaseUser, StreamViewer] | JsonResponse:
    """The token's (else the session's) user, counted against the token's request budget."""
    challenge = {"WWW-Authenticate": 'Bearer realm="api"'}
    token: PersonalToken | None = None
    try:
        text = bearer_token(request.headers.get("Authorization", "").encode("latin-1"))
        if text is not None:
            user, token = await sync_to_async(token_authenticate)(text)
        else:
            user = await request.auser()  # type: ignore[assignment]
    except AuthenticationFailed as exc:
        return _error(401, str(exc.detail), **challenge)
    if not (isinstance(user, AbstractBaseUser) and user.is_authenticated):
        return _error(401, "Authentication credentials were not provided.", **challenge)
    throttle = IdentityThrottle(user_id=user.pk, token=token)
    if not await sync_to_async(throttle.allow)():
        wait = throttle.wait()
        return _error(
            429,
            "Too many requests with this token; wait and retry.",
            **({"Retry-After": str(int(wait) + 1)} if wait is not None else {}),
        )
    if token is not None:
        return user, StreamViewer(user_id=user.pk, token_id=token.pk)
    return user, StreamViewer(user_id=user.pk, session_key=request.session.session_key)


def _attempt_progress(attempt_id: int) -> tuple[str, bool]:
    """The attempt's state, and whether all its files have been read (nothing more comes)."""
    state, files_complete = Attempt.objects.values_list("state", "files_complete").get(
        pk=attempt_id
    )
    return state, bool(files_complete and state in FINAL_STATES)


class _Clock:
    def __init__(self) -> None:
        self.started = self.beat = self.checked = time.monotonic()

    def heartbeat_due(self) -> bool:
        now = time.monotonic()
        if now - self.beat >= HEARTBEAT_SECONDS:
            self.beat = now
            return True
        return False

    def access_check_due(self) -> bool:
        now = time.monotonic()
        if now - self.checked >= ACCESS_CHECK_SECONDS:
            self.checked = now
            return True
        return False

    def expired(self) -> bool:
        return time.monotonic() - self.started >= MAX_STREAM_SECONDS


# --- the log --------------------------------------------------------------------------


class LogStreamQuery(serializers.Serializer[Any]):
    file = _log_file_field()
    offset = serializers.IntegerField(
        min_value=0, max_value=BIGINT_MAX, default=0, help_text="First byte to send."
    )


async def log_events(attempt_id: int, file: str, offset: int) -> AsyncIterator[bytes]:
    """`log` events from `offset` on, `state` on each change, `end` when nothing more comes."""
    read = sync_to_async(log_read)
    progress = sync_to_async(_attempt_progress)
    sent_state = None
    while True:
        # The state first: once it says done, everything is stored before the read.
        state, done = await progress(attempt_id)
        piece: LogSlice = await read(
            attempt_id=attempt_id, file=file, offset=offset, limit=LOG_EVENT_BYTES
        )
        if piece.offset > offset:
            # Dropped from the database (LOG_KEEP_BYTES): the REST log range reads them
            # from the cluster's copy.
            yield sse("gap", {"offset": offset, "end": piece.offset}, str(piece.offset))
            offset = piece.offset
        keep = len(piece.data) if done else utf8_complete(piece.data)
        if keep:
            data = piece.data[:keep]
            offset = piece.offset + keep
            text = data.decode("utf-8", errors="replace")
            yield sse("log", {"offset": piece.offset, "end": offset, "text": text}, str(offset))
            continue
        if state != sent_state:
            sent_state = state
            yield sse("state", {"state": state}, str(offset))
        if done and offset >= piece.size:
            yield sse("end", {"state": state, "offset": offset}, str(offset))
            return
        yield TICK
        await asyncio.sleep(POLL_SECONDS)


async def log_stream(request: HttpRequest, job_id: int, number: int) -> HttpResponseBase:
    """GET: follow an attempt's log file as server-sent events (resume with Last-Event-ID)."""
    found = await _viewer_attempt(request, job_id, number)
    if isinstance(found, JsonResponse):
        return found
    viewer, attempt = found
    params = request.GET.dict()
    if last := request.headers.get("Last-Event-ID"):
        params["offset"] = last
    query = LogStreamQuery(data=params)
    if not query.is_valid():
        return _error(400, query.errors)
    events = log_events(attempt.pk, query.validated_data["file"], query.validated_data["offset"])
    return await _event_stream(events, viewer, job_id)


# --- metrics ----------------------------------------------------------------------------


class MetricStreamQuery(serializers.Serializer[Any]):
    name = serializers.ListField(
        child=serializers.CharField(max_length=200),
        required=False,
        default=list,
        help_text="Series to follow (repeatable); none: all but the GPU samples.",
    )
    after = serializers.FloatField(
        required=False, default=None, allow_null=True, help_text="Send only points past this x."
    )


def _series_last_x(attempt_id: int, names: list[str]) -> dict[str, float]:
    points = last_points(attempt_ids=[attempt_id]).get(attempt_id, {})
    wanted = set(names)
    return {
        name: x
        for name, (x, _) in points.items()
        if (name in wanted if names else not name.startswith(GPU_SERIES_PREFIX))
    }


def _new_points(
    attempt_id: int, name: str, after: float | None
) -> tuple[list[float], list[float | None]]:
    """The points past `after`, y None at a gap (`SeriesData.with_gaps`)."""
    data = series_read(attempt_id=attempt_id, name=name, x_from=after, max_points=MAX_POINTS_CAP)
    xs, ys = data.with_gaps()
    if after is None:
        return xs, ys
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if x > after]
    return [x for x, _ in pairs], [y for _, y in pairs]


async def metric_events(
    attempt_id: int, names: list[str], after: dict[str, float], default_after: float | None = None
) -> AsyncIterator[bytes]:
    """`points` events per series past `after` (else `default_after`), `state`, then `end`.

    A first read of a long series comes downsampled (MAX_POINTS_CAP points); later
    events carry every new point.
    """
    last_xs = sync_to_async(_series_last_x)
    read = sync_to_async(_new_points)
    progress = sync_to_async(_attempt_progress)
    sent_state = None
    while True:
        # Read the state first: what is stored by the time it says done is then all there is.
        state, done = await progress(attempt_id)
        sent = False
        for name, last_x in sorted((await last_xs(attempt_id, names)).items()):
            since = after.get(name, default_after)
            if since is not None and last_x <= since:
                continue
            xs, ys = await read(attempt_id, name, since)
            if xs:
                after[name] = xs[-1]
                sent = True
                gaps = [x for x, y in zip(xs, ys, strict=True) if y is None]
                body = {"name": name, "x": xs, "y": ys, "nonfinite": gaps}
                yield sse("points", body, json.dumps(after))
        if state != sent_state:
            sent_state = state
            yield sse("state", {"state": state}, json.dumps(after))
        if done and not sent:
            yield sse("end", {"state": state}, json.dumps(after))
            return
        yield TICK
        await asyncio.sleep(POLL_SECONDS)


def _resume_point(last_event_id: str) -> dict[str, float] | None:
    try:
        value = json.loads(last_event_id)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    try:
        return {str(name): float(x) for name, x in value.items()}
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past a float
        return None


async def metric_stream(request: HttpRequest, job_id: int, number: int) -> HttpResponseBase:
    """GET: follow an attempt's metric series as server-sent events (resume with Last-Event-ID)."""
    found = await _viewer_attempt(request, job_id, number)
    if isinstance(found, JsonResponse):
        return found
    viewer, attempt = found
    query = MetricStreamQuery(data=request.GET)
    if not query.is_valid():
        return _error(400, query.errors)
    names: list[str] = query.validated_data["name"]
    start = query.validated_data["after"]
    after: dict[str, float] = {}
    if last := request.headers.get("Last-Event-ID"):
        resumed = _resume_point(last)
        if resumed is None:
            return _error(400, {"Last-Event-ID": ["Send back the id of the last event received."]})
        after = resumed
    return await _event_stream(
        metric_events(attempt.pk, names, after, default_after=start), viewer, job_id
    )


# --- shared -------------------------------------------------------------------------------


async def _viewer_attempt(
    request: HttpRequest, job_id: int, number: int
) -> tuple[StreamViewer, Attempt] | JsonResponse:
    """The caller and the attempt, or the refusal: 401/429 for the caller, 404 for the attempt."""
    found = await _viewer(request)
    if isinstance(found, JsonResponse):
        return found
    user, viewer = found
    attempt = await sync_to_async(attempt_for_viewer)(user=user, job_id=job_id, number=number)
    if attempt is None:
        return _error(404, "Not found.")
    return viewer, attempt


async def _guarded(
    events: AsyncIterator[bytes], viewer: StreamViewer, job_id: int, slot: str
) -> AsyncIterator[bytes]:
    """The events while the viewer may follow the job; heartbeats renew the slot's lease."""
    may_follow = sync_to_async(viewer_may_follow)
    renew = sync_to_async(slot_renew)
    clock = _Clock()
    try:
        async for chunk in events:
            if chunk:
                yield chunk
            heartbeat = clock.heartbeat_due()
            if (heartbeat or clock.access_check_due()) and not await may_follow(
                viewer=viewer, job_id=job_id
            ):
                yield sse("denied", {"detail": ACCESS_ENDED})
                return
            if heartbeat:
                if not await renew(kind=SLOT_KIND, user_id=viewer.user_id, slot=slot):
                    return  # the lease lapsed (never: one is three heartbeats); reconnect
                yield b": keep-alive\n\n"
            if clock.expired():
                return
    finally:
        # Also when the client goes away: Django cancels the stream at its next await.
        # A reset that goes unnoticed costs the slot only until its lease ends.
        await sync_to_async(slot_give_back)(kind=SLOT_KIND, user_id=viewer.user_id, slot=slot)


ACCESS_ENDED = (
    "Your access to this job ended (token revoked or expired, signed out, or no longer "
    "in its project); the stream is closed."
)


async def _event_stream(
    events: AsyncIterator[bytes], viewer: StreamViewer, job_id: int
) -> HttpResponseBase:
    slot = await sync_to_async(slot_take)(
        kind=SLOT_KIND, user_id=viewer.user_id, cap=OPEN_STREAMS_PER_USER
    )
    if slot is None:
        return _error(
            429,
            f"You have {OPEN_STREAMS_PER_USER} live streams open; close one (or wait for one "
            "to end) before opening another.",
            **{"Retry-After": str(int(HEARTBEAT_SECONDS))},
        )
    return StreamingHttpResponse(
        _guarded(events, viewer, job_id, slot),
        content_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )
