from django.db.models import Exists, OuterRef, Q, QuerySet

from clusters.models import Cluster, ClusterAccount
from jobs.enums import FINAL_STATES, LIVE_STATES
from jobs.models import Attempt


def polled_attempts() -> QuerySet[Attempt]:
    """Attempts Slurm holds, and finished ones whose files are not all read: what polls read."""
    return Attempt.objects.filter(
        Q(state__in=LIVE_STATES) | Q(state__in=FINAL_STATES, files_complete=False)
    ).exclude(slurm_job_id="")


def live_attempts(*, cluster_id: int) -> list[Attempt]:
    """This cluster's polled attempts, with what a poll reads of them: each one's job and
    account, and the cluster, one object each for all the rows.

    Joined on every row, the cluster (twice) and the account made a poll of 1,000 jobs
    convert three times the columns and decrypt their keys 3,000 times (a third of the
    poll, bench/soak.py profiled).
    """
    attempts = list(
        polled_attempts().filter(job__cluster_id=cluster_id).select_related("job").order_by("id")
    )
    if not attempts:
        return attempts
    cluster = Cluster.objects.get(pk=cluster_id)
    accounts = ClusterAccount.objects.in_bulk({a.account_id for a in attempts} - {None})
    for attempt in attempts:
        attempt.job.cluster = cluster
        account = accounts.get(attempt.account_id) if attempt.account_id else None
        if account is not None and account.cluster_id == cluster_id:
            account.cluster = cluster
        attempt.account = account
    return attempts


def clusters_to_poll() -> QuerySet[Cluster]:
    """Active clusters with an attempt to poll (an ended job's last output included)."""
    attempts = polled_attempts().filter(job__cluster=OuterRef("pk"))
    return Cluster.objects.filter(Exists(attempts), is_active=True)
