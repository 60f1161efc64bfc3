from django.db.models import Q, QuerySet

from jobs.models import FINAL_STATES, LIVE_STATES, Attempt


def live_attempts(*, cluster_id: int) -> QuerySet[Attempt]:
    """Attempts Slurm holds on this cluster, and finished ones whose files are not all read."""
    return (
        Attempt.objects.filter(job__cluster_id=cluster_id)
        .filter(Q(state__in=LIVE_STATES) | Q(state__in=FINAL_STATES, files_complete=False))
        .exclude(slurm_job_id="")
        .select_related("account", "account__cluster", "job", "job__cluster")
        .order_by("id")
    )
