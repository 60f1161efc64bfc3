"""Mirroring a project's budgets into Slurm's association limits (optional per cluster).

Slurm then refuses jobs itself once the account's budget is spent, even ones submitted
outside the portal: the GPU-, CPU- and node-hour budgets as GrpTRESMins (gres/gpu, cpu,
node), concurrent GPUs as GrpTRES=gres/gpu and concurrent jobs as GrpSubmitJobs. A blank
budget clears its limit (-1), so the account always shows what the quota says.
GrpTRESMins counts usage since the last reset (PriorityUsageResetPeriod on the cluster),
so the cluster's reset period should match the quota's period. Slurm's GrpTRES counts the
GPUs of running jobs only, where the portal's concurrent-GPU limit counts pending ones
too: the portal's own check stays the stricter one.
"""

import shlex
from dataclasses import dataclass
from decimal import Decimal

from clusters.errors import ClusterError
from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.slurm.accounting import (
    AccountLimits,
    account_add_argv,
    account_limits_argv,
    run_sacctmgr,
)
from clusters.ssh import pool
from portal_lib.errors import PortalError
from projects.models import Project, Quota


class MirrorError(PortalError):
    """The mirror cannot be applied; the message says what to change."""


@dataclass(frozen=True)
class MirrorPlan:
    project: Project
    argvs: list[list[str]]
    why_not: str  # non-empty when there is nothing to mirror

    @property
    def commands(self) -> list[str]:
        return [shlex.join(argv) for argv in self.argvs]


def mirror_plan(*, project: Project, quota: Quota | None) -> MirrorPlan:
    """The sacctmgr commands that would mirror the quota (a dry run: nothing runs)."""
    if not project.slurm_account:
        return MirrorPlan(project, [], "The project has no Slurm account to set a limit on.")
    if quota is None:
        return MirrorPlan(project, [], "The project has no quota.")
    return MirrorPlan(
        project,
        [
            account_add_argv(account=project.slurm_account, description=project.name),
            account_limits_argv(account=project.slurm_account, limits=quota_limits(quota)),
        ],
        "",
    )


def _minutes(hours: Decimal | None) -> int | None:
    return None if hours is None else int(hours * 60)


def quota_limits(quota: Quota) -> AccountLimits:
    return AccountLimits(
        gpu_minutes=_minutes(quota.gpu_hours_per_period),
        cpu_minutes=_minutes(quota.cpu_hours_per_period),
        node_minutes=_minutes(quota.node_hours_per_period),
        running_gpus=quota.max_concurrent_gpus,
        submitted_jobs=quota.max_concurrent_jobs,
    )


def operator_account(cluster: Cluster) -> ClusterAccount:
    account = (
        ClusterAccount.objects.select_related("cluster")
        .filter(cluster=cluster, user__isnull=True)
        .first()
    )
    if account is None:
        raise MirrorError(
            f"Cluster {cluster.name} has no shared service account: add one whose Slurm user "
            "is a sacctmgr operator (AdminLevel=Operator) to mirror quotas."
        )
    return account


def mirror_apply(*, project: Project, cluster: Cluster) -> list[str]:
    """Run the mirror's sacctmgr commands on a cluster that has mirroring switched on."""
    if not cluster.mirror_quotas:
        raise MirrorError(
            f"Quota mirroring is off for cluster {cluster.name}; switch it on in the cluster's "
            "admin page first."
        )
    plan = mirror_plan(project=project, quota=Quota.objects.filter(project=project).first())
    if plan.why_not:
        raise MirrorError(plan.why_not)
    endpoint = account_endpoint(account=operator_account(cluster))
    try:
        with pool.session(endpoint) as connection:
            for argv in plan.argvs:
                run_sacctmgr(connection, argv, tools=cluster.slurm_tools)
    except ClusterError as exc:
        raise MirrorError(f"sacctmgr on {cluster.name} failed: {exc}") from exc
    return plan.commands
