"""Celery tasks for accounting and mail: take ids, call one service."""

from typing import Any

from celery import shared_task

from projects.accounting import AccountingNotReady, attempt_charge_from_accounting
from projects.notifications import budget_alert_send, job_end_send
from projects.services import reservations_reconcile

# slurmdbd records a job's end a moment after slurmctld: wait up to ~5 minutes.
CHARGE_RETRIES = 8


@shared_task(bind=True, max_retries=CHARGE_RETRIES)
def charge_from_accounting(self: Any, attempt_id: int) -> None:
    try:
        attempt_charge_from_accounting(
            attempt_id=attempt_id, last_try=self.request.retries >= CHARGE_RETRIES
        )
    except AccountingNotReady as exc:
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc


@shared_task(ignore_result=True)
def send_budget_alert(alert_id: int) -> None:
    budget_alert_send(alert_id=alert_id)


@shared_task(ignore_result=True)
def send_job_end_mail(attempt_id: int) -> None:
    job_end_send(attempt_id=attempt_id)


@shared_task(ignore_result=True)
def reconcile_reservations() -> None:
    reservations_reconcile()
