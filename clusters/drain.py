"""Draining a sick node from the portal: staff only, as a Slurm operator account.

`scontrol update nodename=<node> state=drain reason=<why>` lets the node's
running jobs finish and starts no new ones there; an admin resumes it after a
look (`scontrol update nodename=<node> state=resume`).
"""

import logging

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied

from clusters.access import can_drain
from clusters.models import Cluster
from clusters.selectors import account_endpoint, account_for
from clusters.slurm import Slurm, SlurmError
from clusters.ssh import SSHError, pool
from portal_lib.errors import PortalError
from portal_lib.viewers import signed_in

logger = logging.getLogger(__name__)


class DrainError(PortalError):
    """The node could not be drained; the message says why and what to do."""


def node_drain(
    *, cluster: Cluster, node: str, reason: str, user: AbstractBaseUser | AnonymousUser
) -> None:
    """Drain `node` of `cluster` on behalf of a staff user; DrainError says what went wrong."""
    if not (signed_in(user) and can_drain(user=user)):
        raise PermissionDenied("Only staff can drain nodes.")
    # The staff member's own account on the cluster, else the cluster's service account.
    account = account_for(user=user, cluster=cluster)
    if account is None:
        raise DrainError(
            f"Cluster {cluster.name} has no account to run scontrol as: register your own "
            "cluster account or a service account that is a Slurm operator."
        )
    why = f"{reason.strip() or 'drained from the portal'} (by {user.get_username()} via portal)"
    try:
        with pool.session(account_endpoint(account=account)) as connection:
            Slurm(connection, tools=cluster.slurm_tools).drain(node, why)
    except ValueError as exc:
        raise DrainError(f"Cannot drain {node!r}: {exc}.") from exc
    except SlurmError as exc:
        raise DrainError(
            f"Slurm refused to drain {node} as {account.username}: {exc.slurm_message}. "
            "The account must be a Slurm operator or admin (sacctmgr modify user "
            f"{account.username} set adminlevel=operator), or drain it on the cluster."
        ) from exc
    except SSHError as exc:
        raise DrainError(f"Cannot reach cluster {cluster.name}: {exc}") from exc
    logger.warning("node %s of %s drained by %s: %s", node, cluster.name, user, why)
