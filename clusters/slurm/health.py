"""'Test connection' for a cluster: a fresh SSH connection (pinned host key) and `sinfo`."""

import shlex
import time
from dataclasses import dataclass

from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.ssh import Connection, HostKeyMismatch, SSHError

SINFO_ARGV = ["sinfo", "--noheader", "--format=%P %a %D %t %G"]
TIMEOUT = 15.0


@dataclass(frozen=True)
class ConnectionCheck:
    cluster: str
    ok: bool
    message: str


def _account(cluster: Cluster) -> ClusterAccount | None:
    accounts = list(ClusterAccount.objects.select_related("cluster").filter(cluster=cluster))
    # The shared service account when there is one, else any personal one.
    return next((a for a in accounts if a.user_id is None), accounts[0] if accounts else None)


def cluster_connection_check(*, cluster: Cluster) -> ConnectionCheck:
    """Connect afresh (never from the pool, so the host key is really checked) and run sinfo."""
    account = _account(cluster)
    if account is None:
        return ConnectionCheck(
            cluster.name, False, "No cluster account to connect as: add one under Cluster accounts."
        )
    started = time.monotonic()
    try:
        with Connection(account_endpoint(account=account), connect_timeout=TIMEOUT) as connection:
            result = connection.run(shlex.join(SINFO_ARGV), timeout=TIMEOUT)
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
            f"{account.username}, but sinfo failed (exit {result.exit_status}): "
            f"{result.error_text.strip()[:500]}",
        )
    partitions = "; ".join(line.strip() for line in result.text.splitlines() if line.strip())
    return ConnectionCheck(
        cluster.name,
        True,
        f"Host key {cluster.host_key_fingerprint} verified, logged in as {account.username} "
        f"in {elapsed:.1f} s; sinfo: {partitions or '(no partitions)'}",
    )
