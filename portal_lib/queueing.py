"""Queueing a Celery task by name once the transaction commits.

Services never import a tasks module (tasks import services: that would be a
circle); they name the task. The name is looked up in the Celery app's
registry, so eager mode and test doubles on `.delay` apply as for a direct
call; where this process has not loaded the tasks yet, Celery's own
autodiscovery loads every app's `tasks` module once.
"""

import logging
import threading
from typing import Any

from celery import current_app
from django.db import transaction
from kombu.exceptions import OperationalError

from portal_lib.errors import PortalError

logger = logging.getLogger(__name__)

# Seconds `queue_check` waits for the broker to answer.
CHECK_TIMEOUT = 2
_TASKS_LOADING = threading.Lock()


class QueueUnavailable(PortalError):
    """The task queue (the Redis broker) cannot be reached: nothing was recorded."""

    status = 503
    code = "queue_unavailable"


def task_named(name: str) -> Any:
    """The registered task called `name` (every installed app's tasks module is loaded).

    A web server's threads may ask at once, and a thread that loaded while another was
    part-way through found no task (NotRegistered: 2 of 20 submissions at once to a
    fresh server were 500s); one loads at a time, and the others then find the task.
    """
    if name not in current_app.tasks:
        with _TASKS_LOADING:
            if name not in current_app.tasks:
                current_app.loader.import_default_modules()
    return current_app.tasks[name]


def queue_check(what: str) -> None:
    """Refuse `what` with a clear error unless the broker answers now.

    Called before recording work that is queued on commit: with the broker down the
    caller hears so, instead of work being committed and then an error raised.
    """
    if current_app.conf.task_always_eager:
        return
    try:
        with current_app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, timeout=CHECK_TIMEOUT)
    except (OperationalError, OSError) as exc:
        logger.warning("the task queue is unreachable: %s", exc)
        raise QueueUnavailable(
            f"The portal's task queue is unreachable right now, so {what} was not recorded; "
            "try again in a minute."
        ) from exc


def queue_on_commit(
    name: str,
    *args: Any,
    countdown: float | None = None,
    expires: float | None = None,
    redriven: bool = False,
) -> None:
    """Send task `name` with `args` after the current transaction commits (at once outside one).

    `expires`: seconds after which a worker drops the message unrun (work that a newer
    message would repeat). `redriven`: a reconciler re-sends what this message was for, so
    a send that fails (the broker went down since `queue_check`) is logged, not raised to
    a caller whose work is already committed.
    """

    def send() -> None:
        task = task_named(name)
        try:
            if countdown is None and expires is None:
                task.delay(*args)
            else:
                task.apply_async(args, countdown=countdown, expires=expires)
        except (OperationalError, OSError):
            if not redriven:
                raise
            logger.exception("task %s%r not queued; the reconciler will re-send it", name, args)

    transaction.on_commit(send)
