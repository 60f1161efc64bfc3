from django.db.models import Exists, OuterRef, Q, QuerySet

from clusters.models import Cluster
from jobs.models import FINAL_STATES, LIVE_STATES, Attempt


def polled_attempts() -> QuerySet[Attempt]:
    """Attempts Slurm holds, and finished ones whose files are not all read: what polls read."""
    return Attempt.objects.filter(
        Q(state__in=LIVE_STATES) | Q(state__in=FINAL_STATES, files_complete=False)
    ).exclude(slurm_job_id="")


def live_attempts(*, cluster_id: int) -> QuerySet[Attempt]:
    """This cluster's polled attempts, with what a poll reads of them."""
    return (
        polled_attempts()
        .filter(job__cluster_id=cluster_id)
        .select_related("account", "account__cluster", "job", "job__cluster")
        .order_by("id")
    )


def clusters_to_poll() -> QuerySet[Cluster]:
    """Active clusters with an attempt to poll (an ended job's last output included)."""
    attempts = polled_attempts().filter(job__cluster=OuterRef("pk"))
    return Cluster.objects.filter(Exists(attempts), is_active=True)
