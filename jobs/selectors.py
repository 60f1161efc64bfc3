from django.contrib.auth.models import User
from django.db.models import Q, QuerySet

from clusters.models import Cluster, ClusterAccount
from jobs.models import FINAL_STATES, LIVE_STATES, Attempt
from projects.models import Membership


def membership_for(*, user: User, project_id: int) -> Membership | None:
    return Membership.objects.filter(user=user, project_id=project_id).first()


def account_for(*, user: User, cluster: Cluster) -> ClusterAccount | None:
    """The user's own account on the cluster, else the cluster's shared service account."""
    accounts = ClusterAccount.objects.select_related("cluster").filter(
        Q(user=user) | Q(user__isnull=True), cluster=cluster
    )
    by_kind = {account.user_id is None: account for account in accounts}
    return by_kind.get(False) or by_kind.get(True)


def live_attempts(*, cluster_id: int) -> QuerySet[Attempt]:
    """Attempts Slurm holds on this cluster, and finished ones whose files are not all read."""
    return (
        Attempt.objects.filter(job__cluster_id=cluster_id)
        .filter(Q(state__in=LIVE_STATES) | Q(state__in=FINAL_STATES, files_complete=False))
        .exclude(slurm_job_id="")
        .select_related("account", "account__cluster", "job", "job__cluster")
        .order_by("id")
    )
