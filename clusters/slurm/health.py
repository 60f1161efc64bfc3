"""'Test connection' for a cluster: a fresh SSH connection (pinned host key) and `sinfo`."""

import shlex
import time
from dataclasses import dataclass

from clusters.models import Cluster
from clusters.selectors import reader_endpoint
from clusters.ssh import Connection, HostKeyMismatch, SSHError

SINFO_ARGV = ["sinfo", "--noheader", "--format=%P %a %D %t %G"]
TIMEOUT = 15.0


@dataclass(frozen=True)
class ConnectionCheck:
    cluster: str
    ok: bool
    message: str


def cluster_connection_check(*, cluster: Cluster) -> ConnectionCheck:
    """Connect afresh (never from the pool, so the host key is really checked) and run sinfo."""
    endpoint = reader_endpoint(cluster=cluster)
    if endpoint is None:
        return ConnectionCheck(
            cluster.name,
            False,
            "No cluster account to connect as: add one under Cluster accounts. Better, set "
            "the cluster's portal account (a login only the portal uses).",
        )
    started = time.monotonic()
    command = shlex.join(cluster.slurm_tools.wrap(SINFO_ARGV))
    try:
        with Connection(endpoint, connect_timeout=TIMEOUT) as connection:
            result = connection.run(command, timeout=TIMEOUT)
    except HostKeyMismatch as exc:
        return ConnectionCheck(cluster.name, False, str(exc))
    except SSHError as exc:
        return ConnectionCheck(cluster.name, False, str(exc))
    elapsed = time.monotonic() - started
    if result.exit_status != 0:
        return ConnectionCheck(
            cluster.name,
            False,
            f"Host key {cluster.host_key_fingerprint} verified and logged in as "
            f"{endpoint.username}, but sinfo failed (exit {result.exit_status}): "
            f"{result.error_text.strip()[:500]}",
        )
    partitions = "; ".join(line.strip() for line in result.text.splitlines() if line.strip())
    return ConnectionCheck(
        cluster.name,
        True,
        f"Host key {cluster.host_key_fingerprint} verified, logged in as {endpoint.username} "
        f"in {elapsed:.1f} s; sinfo: {partitions or '(no partitions)'}"
        + (f". Warning: {cluster.trust_warning}" if cluster.trust_warning else ""),
    )
