"""The readiness check in Celery: takes the report's id, runs it, keeps the verdicts."""

from celery import shared_task

from clusters.onboarding.services import readiness_check_run


@shared_task(ignore_result=True)
def cluster_readiness_check(report_id: int) -> None:
    readiness_check_run(report_id=report_id)
