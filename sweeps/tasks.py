"""Celery tasks of sweeps: call one service."""

from celery import shared_task

from sweeps.tick import sweeps_tick


@shared_task(ignore_result=True)
def advance_sweeps() -> None:
    sweeps_tick()
