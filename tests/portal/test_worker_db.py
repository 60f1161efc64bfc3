"""A real Celery worker keeps its PostgreSQL connections between tasks, as Django keeps a
request's, and drops one that broke (portal.celery, settings.CELERY_DB_REUSE_MAX)."""

import time

import pytest
from django.contrib.auth.models import User
from django.db import connection

from devtools.servers import Server
from jobs.tasks import reconcile_attempts
from tests.fixtures.database import end_other_sessions
from tests.helpers import other_sessions, wait_for

# With beat's polls, sweep ticks and reconciles, each pool process runs several tasks in this.
SEVERAL_TASKS = 4.0


@pytest.mark.django_db
def test_an_eager_task_leaves_its_callers_connection_and_transaction_alone() -> None:
    """A task run in the caller's process (eagerly, as some tests and a shell do) is not
    a worker's task: its caller's connection, even one past CONN_MAX_AGE, stays open."""
    User.objects.create(username="kept")
    connection.close_at = time.monotonic() - 1  # as old as the worker closes
    reconcile_attempts.apply()
    assert User.objects.filter(username="kept").exists()  # the same open transaction


@pytest.mark.django_db(transaction=True)
def test_tasks_keep_their_connection_and_a_killed_one_is_replaced(celery_worker: Server) -> None:
    # Two pool processes, one connection each once both have run a task.
    wait_for(lambda: len(other_sessions()) == 2, 60, "both pool processes' connections")
    kept = other_sessions()
    time.sleep(SEVERAL_TASKS)
    # Closed after each task (Celery's default), they would be new backends by now.
    assert other_sessions() == kept

    end_other_sessions()
    # The next task on a process fails on its dead connection; the one after connects anew
    # and keeps it. (Only one process may run tasks meanwhile: an idle worker's pool sends
    # them to the first idle process, and one CI run left the other without a task for 60 s.)
    wait_for(lambda: other_sessions() - kept, 60, "a new connection in place of a killed one")
    replaced = other_sessions() - kept
    assert not other_sessions() & kept
    time.sleep(SEVERAL_TASKS)
    assert replaced <= other_sessions()
    assert celery_worker.alive
