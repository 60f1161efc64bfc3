"""Queueing a Celery task by name once the transaction commits.

Services never import a tasks module (tasks import services: that would be a
circle); they name the task. The name is looked up in the Celery app's
registry, so eager mode and test doubles on `.delay` apply as for a direct
call; where this process has not loaded the tasks yet, Celery's own
autodiscovery loads every app's `tasks` module once.
"""

from typing import Any

from celery import current_app
from django.db import transaction


def task_named(name: str) -> Any:
    """The registered task called `name` (every installed app's tasks module is loaded)."""
    if name not in current_app.tasks:
        current_app.loader.import_default_modules()
    return current_app.tasks[name]


def queue_on_commit(name: str, *args: Any, countdown: float | None = None) -> None:
    """Send task `name` with `args` after the current transaction commits (at once outside one)."""

    def send() -> None:
        task = task_named(name)
        if countdown is None:
            task.delay(*args)
        else:
            task.apply_async(args, countdown=countdown)

    transaction.on_commit(send)
