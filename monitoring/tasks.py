"""Celery tasks of monitoring: take ids, call one service."""

from celery import shared_task

from monitoring.stacks import attempt_request_stacks


@shared_task(ignore_result=True)
def request_stacks(attempt_id: int) -> None:
    attempt_request_stacks(attempt_id=attempt_id)
