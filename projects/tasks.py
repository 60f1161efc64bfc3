"""Celery tasks for budget mail: take ids, call one service."""

from celery import shared_task

from projects.notifications import budget_alert_send


@shared_task(ignore_result=True)
def send_budget_alert(alert_id: int) -> None:
    budget_alert_send(alert_id=alert_id)
