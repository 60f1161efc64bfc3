"""Celery tasks of monitoring: take ids, call one service."""

from datetime import datetime, timedelta

from celery import shared_task

from monitoring.alerts.delivery import alert_deliver
from monitoring.checkpoints.storage import checkpoint_rules_apply
from monitoring.goodput.card import efficiency_cards_refresh
from monitoring.goodput.digest import goodput_digests_send
from monitoring.goodput.idle import idle_warning_send
from monitoring.goodput.kernels import kernels_ask
from monitoring.hangs.stacks import attempt_request_stacks


@shared_task
def send_idle_warning_mail(attempt_id: int) -> None:
    idle_warning_send(attempt_id=attempt_id)


@shared_task(ignore_result=True)
def ask_session_kernels(attempt_id: int, window_seconds: float, now: str) -> None:
    kernels_ask(
        attempt_id=attempt_id,
        window=timedelta(seconds=window_seconds),
        now=datetime.fromisoformat(now),
    )


@shared_task(ignore_result=True)
def refresh_efficiency_cards() -> None:
    efficiency_cards_refresh()


@shared_task(ignore_result=True)
def request_stacks(attempt_id: int) -> None:
    attempt_request_stacks(attempt_id=attempt_id)


@shared_task(ignore_result=True)
def send_goodput_digests() -> None:
    goodput_digests_send()


@shared_task(ignore_result=True)
def deliver_alert(alert_id: int) -> None:
    alert_deliver(alert_id=alert_id)


@shared_task(ignore_result=True)
def apply_checkpoint_rules() -> None:
    checkpoint_rules_apply()
