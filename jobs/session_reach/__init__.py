"""How the portal reaches a session's server, on its node's loopback, from its owner's login.

Two ways, chosen per cluster (Cluster.session_reach):

- **srun relay**: an exec channel on the owner's login runs
  `srun --jobid=<job> --overlap --nodes=1 --ntasks=1 --unbuffered python3 -I -c <relay> <port>`:
  a step of the session's own allocation, as its owner, on its node, connecting to
  127.0.0.1:<port> there (jobs.session_reach.relay) and copying bytes through srun's stdio.
  Works wherever the login node is not the compute node, and needs no port forwarding.
  `--unbuffered` is needed: without it slurmstepd holds a task's output until a newline.
- **tunnel**: a direct-tcpip channel to (node, port), opened by the login node's sshd;
  it reaches the node's loopback only where the login node is the node (the sandbox).

Only numbers cross into the relay's command: the Slurm job id the portal recorded and the
port parsed from the session file (jobs.interactive.parse_session_file); the node is
Slurm's. The relay connects to 127.0.0.1 only, so no tenant can aim the portal elsewhere.
"""

import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from clusters.models import SessionReach
from clusters.slurm.tools import SlurmTools
from clusters.ssh import CONNECT_TIMEOUT, Connection, SSHError, Tunnel
from jobs.interactive import session_port_valid
from jobs.models import Attempt

RELAY = Path(__file__).with_name("relay.py")
READY = b"+"  # jobs.session_reach.relay.READY: the relay's first byte once it is connected
# srun's start (the controller's step creation, slurmstepd's launch) before READY arrives.
RELAY_READY_TIMEOUT = 30.0
_JOB_ID = re.compile(r"[0-9]{1,12}")


@cache
def relay_source() -> str:
    return RELAY.read_text()


def relay_command(*, tools: SlurmTools, slurm_job_id: str, port: int) -> str:
    """The login node's command line for one relayed stream to 127.0.0.1:port on the job's
    node; ValueError for a job id or port that is not a plain number in range."""
    if not _JOB_ID.fullmatch(slurm_job_id):
        raise ValueError(f"not a plain Slurm job id: {slurm_job_id!r}")
    if not session_port_valid(port):
        raise ValueError(f"not a session port: {port!r}")
    argv = [
        "srun",
        f"--jobid={slurm_job_id}",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
        "--unbuffered",
        "python3",
        "-I",
        "-c",
        relay_source(),
        str(port),
    ]
    return shlex.join(tools.wrap(argv))


@dataclass(frozen=True)
class SessionWay:
    """How to reach one session's server: the cluster's way, its node, port and job."""

    reach: str  # a SessionReach value
    node: str
    port: int
    slurm_job_id: str
    tools: SlurmTools

    @classmethod
    def of(cls, attempt: Attempt, *, node: str, port: int) -> "SessionWay":
        """For the attempt on its account's cluster (account and cluster loaded)."""
        assert attempt.account is not None  # noqa: S101 - a session runs under an account
        cluster = attempt.account.cluster
        return cls(
            reach=cluster.session_reach,
            node=node,
            port=port,
            slurm_job_id=attempt.slurm_job_id,
            tools=cluster.slurm_tools,
        )

    def open(self, connection: Connection, *, timeout: float = CONNECT_TIMEOUT) -> Tunnel:
        """A stream to the server; SSHError (not retryable: the login is fine) while it
        does not listen."""
        if self.reach == SessionReach.TUNNEL:
            return connection.open_tunnel(self.node, self.port, timeout=timeout)
        try:
            command = relay_command(
                tools=self.tools, slurm_job_id=self.slurm_job_id, port=self.port
            )
        except ValueError as exc:
            raise SSHError(f"The session cannot be relayed: {exc}", retryable=False) from exc
        stream = connection.open_command_stream(command, timeout=timeout)
        try:
            stream.settimeout(max(timeout, RELAY_READY_TIMEOUT))
            ready = stream.recv(len(READY))
        except OSError as exc:
            stream.close()
            raise SSHError(f"The session's relay did not start: {exc}", retryable=False) from exc
        if ready != READY:
            said = stream.recv_stderr(2048) if stream.recv_stderr_ready() else b""
            stream.close()
            reason = said.decode(errors="replace").strip() or "it ended without a word"
            raise SSHError(f"The session's relay did not connect: {reason}", retryable=False)
        return stream
