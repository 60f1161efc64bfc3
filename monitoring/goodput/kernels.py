"""Whether a JupyterLab session's kernels run something: its server's `GET api/kernels`,
asked over the owner's login the way the portal's proxy reaches it (jobs.interactive).

The answer can only keep a session from being warned or reclaimed (monitoring.goodput.idle);
it never makes its GPUs count as busy in a card or a charge. So a session that fakes
busy kernels keeps its own project paying, and one that cannot be asked is judged by
its GPUs alone, as any job is. The call is bounded: one SSH command and one stream to
the server (a tunnel or an srun relay: jobs.session_reach), each with a deadline, and an
answer read up to KERNELS_MAX_BYTES.

The poll never asks: the server is the tenant's, and one that answers slowly would hold
every cluster's poll. The poll reads a cached verdict (kernels_verdict); without one it
queues a Celery task that asks (kernels_ask_queue, at most one per session per
KERNELS_RECHECK_SECONDS) and holds the session's warning or cancel back until it is in.
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from django.core.cache import cache
from django.utils import timezone

from clusters.errors import ClusterError
from clusters.selectors import account_endpoint
from clusters.ssh import pool
from jobs.enums import State
from jobs.interactive import lab_base_url, session_address_read, session_node
from jobs.models import Attempt
from jobs.session_reach import SessionWay
from portal_lib.queueing import queue_on_commit

logger = logging.getLogger(__name__)

KERNELS_TIMEOUT = 5.0  # seconds, for the session file and again for the answer
KERNELS_MAX_BYTES = 64 * 1024  # a kernel is about 200 bytes of the answer
# A verdict is kept this long: the poll runs every second or two, and a session's GPUs may
# stay idle for hours while a CPU cell runs.
KERNELS_RECHECK_SECONDS = 30
ASK_SESSION_KERNELS = "monitoring.tasks.ask_session_kernels"
# States of a kernel that runs nothing; any other (busy, starting, restarting...) runs something.
_QUIET_STATES = frozenset({"idle", "dead"})


@dataclass(frozen=True)
class KernelActivity:
    """What the server said: whether a kernel runs something, and its latest activity."""

    running: bool
    last_activity: datetime | None


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or len(value) > 40:
        return None
    try:
        at = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def parse_kernels(body: bytes) -> KernelActivity | None:
    """The server's kernel list, or None for anything that is not one."""
    if len(body) > KERNELS_MAX_BYTES:
        return None
    try:
        kernels = json.loads(body)
    except ValueError:
        return None
    if not isinstance(kernels, list) or not all(isinstance(k, dict) for k in kernels):
        return None
    running = any(k.get("execution_state") not in _QUIET_STATES for k in kernels)
    times = [t for k in kernels if (t := _parse_time(k.get("last_activity"))) is not None]
    return KernelActivity(running=running, last_activity=max(times, default=None))


def kernels_active(activity: KernelActivity | None, *, window: timedelta, now: datetime) -> bool:
    """A kernel runs something, or ran something within the window; False without an answer."""
    if activity is None:
        return False
    if activity.running:
        return True
    return activity.last_activity is not None and now - activity.last_activity < window


class Stream(Protocol):
    """An SSH tunnel, or a socket: what the answer is read from."""

    def settimeout(self, timeout: float) -> None: ...
    def sendall(self, data: bytes) -> None: ...
    def recv(self, size: int) -> bytes: ...


def kernels_answer(tunnel: Stream, request: bytes) -> bytes | None:
    """The body of a 200 answer to an HTTP/1.0 request, read to its end within the deadline."""
    deadline = time.monotonic() + KERNELS_TIMEOUT
    tunnel.settimeout(KERNELS_TIMEOUT)
    tunnel.sendall(request)
    data = b""
    while len(data) <= KERNELS_MAX_BYTES + 4096 and time.monotonic() < deadline:
        chunk = tunnel.recv(16384)
        if not chunk:
            break
        data += chunk
    else:
        return None  # too long or too slow
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split()
    return body if len(status) >= 2 and status[1] == b"200" else None


def kernels_read(attempt: Attempt) -> KernelActivity | None:
    """Ask the attempt's session; None when it cannot be asked or answers something else."""
    node = session_node(attempt)
    if node is None or attempt.account is None:
        return None
    try:
        with pool.session(account_endpoint(account=attempt.account)) as connection:
            address = session_address_read(connection, attempt=attempt, timeout=KERNELS_TIMEOUT)
            if address is None:
                return None
            way = SessionWay.of(attempt, node=node, port=address.port)
            tunnel = way.open(connection, timeout=KERNELS_TIMEOUT)
        request = (
            f"GET {lab_base_url(attempt.job_id)}api/kernels HTTP/1.0\r\n"
            f"Host: 127.0.0.1:{address.port}\r\n"
            f"Authorization: token {address.token}\r\n\r\n"
        ).encode()
        try:
            body = kernels_answer(tunnel, request)
        finally:
            tunnel.close()
    except (ClusterError, OSError) as exc:
        logger.info("kernels of attempt %s could not be asked: %s", attempt.pk, exc)
        return None
    return None if body is None else parse_kernels(body)


KernelReader = Callable[[Attempt], KernelActivity | None]


def _verdict_key(attempt_id: int, window: timedelta) -> str:
    return f"idle-kernels:{attempt_id}:{int(window.total_seconds())}"


def kernels_verdict(*, attempt_id: int, window: timedelta) -> bool | None:
    """Whether the session's kernels ran something within `window`, as last asked; None
    while no answer is in."""
    verdict = cache.get(_verdict_key(attempt_id, window))
    return verdict if isinstance(verdict, bool) else None


def kernels_ask_queue(*, attempt_id: int, window: timedelta, now: datetime) -> bool:
    """Queue one ask of the session's server, unless one was queued within
    KERNELS_RECHECK_SECONDS; whether one was queued."""
    if not cache.add(f"idle-kernels-asked:{attempt_id}", True, KERNELS_RECHECK_SECONDS):
        return False
    # On the tenants' queue (portal.celery.route_task); one not taken by the time the next
    # may be queued is dropped, so a worker that cannot keep up is never behind by more
    # than one ask per session.
    queue_on_commit(
        ASK_SESSION_KERNELS,
        attempt_id,
        window.total_seconds(),
        now.isoformat(),
        expires=KERNELS_RECHECK_SECONDS,
    )
    return True


def kernels_ask(
    *,
    attempt_id: int,
    window: timedelta,
    now: datetime | None = None,
    read: KernelReader = kernels_read,
) -> bool | None:
    """Ask a running session's server (outside the poll) and keep its verdict for the poll;
    a server that cannot be asked ran nothing, so its GPUs decide. None: not running."""
    attempt = (
        Attempt.objects.select_related("job", "account__cluster")
        .filter(pk=attempt_id, state=State.RUNNING)
        .first()
    )
    if attempt is None:
        return None
    active = kernels_active(read(attempt), window=window, now=now or timezone.now())
    cache.set(_verdict_key(attempt_id, window), active, KERNELS_RECHECK_SECONDS)
    cache.delete(f"idle-kernels-asked:{attempt_id}")
    return active
