"""Where a running session listens, as its owner's login reaches it: the node from Slurm,
the port and token from the session file, read over that login.

The node comes from the poll (Slurm's node list), never from the file: what the job wrote
decides only the port and the token, checked for their shape (jobs.interactive).
"""

import threading
from dataclasses import dataclass, field

from clusters.errors import ClusterError
from clusters.selectors import account_endpoint
from clusters.ssh import Connection, Endpoint, Tunnel, pool
from jobs.enums import State
from jobs.interactive import LabAddress, session_address_read, session_node
from jobs.models import Attempt, Job
from jobs.session_reach import SessionWay

READ_TIMEOUT = 10.0


class SessionUnavailable(Exception):
    """The session cannot be reached now; `status` is the HTTP answer, the message says why."""

    def __init__(self, message: str, *, status: int = 503) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LabTarget:
    endpoint: Endpoint
    node: str
    port: int
    token: str = field(repr=False)
    attempt: str  # the attempt's UUID: what the address belongs to
    way: SessionWay  # the cluster's way to the node's loopback: srun relay or tunnel

    @property
    def pool_key(self) -> tuple[Endpoint, str, int, str, str]:
        return (self.endpoint, self.node, self.port, self.attempt, self.way.reach)

    def open_stream(self, connection: Connection) -> Tunnel:
        """A new stream to the server on the owner's login; SSHError when it does not listen."""
        return self.way.open(connection)


# Addresses read, by attempt: an attempt's server keeps its port and token for its life.
_addresses: dict[str, LabAddress] = {}
_lock = threading.Lock()


def forget(attempt: str) -> None:
    """Read the session file again next time (the server did not answer at its address)."""
    with _lock:
        _addresses.pop(attempt, None)


def lab_target(*, job: Job) -> LabTarget:
    """The running session's target; SessionUnavailable when it has none (yet)."""
    attempt = (
        Attempt.objects.select_related("account__cluster")
        .filter(job_id=job.pk)
        .order_by("-number")
        .first()
    )
    if attempt is None or attempt.state != State.RUNNING or attempt.account is None:
        raise SessionUnavailable(
            "The session is not running: JupyterLab opens once the job runs.", status=409
        )
    node = session_node(attempt)
    if node is None:
        raise SessionUnavailable("The session's node is not known yet; try again in a moment.")
    endpoint = account_endpoint(account=attempt.account)
    key = str(attempt.uuid)
    with _lock:
        address = _addresses.get(key)
    if address is None:
        address = _read_address(endpoint, attempt)
        with _lock:
            _addresses[key] = address
    return LabTarget(
        endpoint=endpoint,
        node=node,
        port=address.port,
        token=address.token,
        attempt=key,
        way=SessionWay.of(attempt, node=node, port=address.port),
    )


def _read_address(endpoint: Endpoint, attempt: Attempt) -> LabAddress:
    try:
        with pool.session(endpoint) as connection:
            address = session_address_read(connection, attempt=attempt, timeout=READ_TIMEOUT)
    except ClusterError as exc:
        raise SessionUnavailable(f"The cluster cannot be reached: {exc}", status=502) from exc
    if address is None:
        raise SessionUnavailable("JupyterLab is starting; this page opens it in a moment.")
    return address
