"""The readiness check in Celery: takes the report's id, runs it, keeps the verdicts."""

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from clusters.onboarding.probe import PROBE_WAIT
from clusters.onboarding.services import readiness_check_abandon, readiness_check_run

# The test jobs may take PROBE_WAIT; the checks around them a minute or two more. Past
# the soft limit the probe's clean-up (cancel, remove) still runs as the exception unwinds.
SOFT_TIME_LIMIT = int(PROBE_WAIT) + 120


@shared_task(ignore_result=True, soft_time_limit=SOFT_TIME_LIMIT, time_limit=SOFT_TIME_LIMIT + 60)
def cluster_readiness_check(report_id: int, onboarding: bool = False) -> None:
    try:
        readiness_check_run(report_id=report_id, onboarding=onboarding)
    except SoftTimeLimitExceeded:
        readiness_check_abandon(
            report_id=report_id, why=f"the check took longer than {SOFT_TIME_LIMIT} s"
        )
