"""The Celery app: Redis broker, JSON messages, settings under the CELERY_ prefix."""

import logging
import os
from typing import Any

import redis
from celery import Celery
from celery.signals import task_postrun, task_prerun, worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections

from portal_lib.health import redis_for
from portal_lib.worker_queues import Heartbeat, polls_queue, served_queues, tenants_queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_heartbeat: Heartbeat | None = None
logger = logging.getLogger(__name__)

# Beat's fan-out of the polls (settings.CELERY_TASK_ROUTES). On the default queue, behind
# a thousand submissions, it expired unrun again and again: no cluster was polled, and a
# watched job's log waited 85 s (bench/soak.py, while its 1,000 jobs were submitted).
POLL_FANOUT = "jobs.tasks.poll_active_clusters"


# Tasks that wait on what a tenant runs or names, each within its own deadline: a session's
# server (its kernels), an alert's webhook, a job's processes (their stacks).
TENANT_TASKS = frozenset(
    {
        "monitoring.tasks.ask_session_kernels",
        "monitoring.tasks.deliver_alert",
        "monitoring.tasks.request_stacks",
    }
)


def route_task(name: str, *_: Any, **__: Any) -> dict[str, str] | None:
    """Where a task goes (portal_lib.worker_queues): the poll fan-out to the polls queue and
    a tenant's task to the tenants' queue, each while a worker takes it; every other task
    where its call or the defaults say."""
    if name != POLL_FANOUT and name not in TENANT_TASKS:
        return None
    try:
        served = served_queues(redis_for(settings.REDIS_URL))
    except redis.RedisError:
        logger.warning("queues of the workers unknown: %s goes to the default queue", name)
        served = set()
    return {"queue": polls_queue(served) if name == POLL_FANOUT else tenants_queue(served)}


@task_prerun.connect
@task_postrun.connect
def _close_old_connections(sender: Any = None, **_: Any) -> None:
    """A task's database connection, as a request's: kept for the next task, closed when
    older than CONN_MAX_AGE or unusable (settings.CELERY_DB_REUSE_MAX). Not for a task
    run eagerly: that one runs inside its caller's connection and transaction."""
    if not getattr(getattr(sender, "request", None), "is_eager", False):
        close_old_connections()


@worker_ready.connect
def _advertise_queues(sender: Any, **_: Any) -> None:
    """Tell beat which queues this worker takes (portal_lib.worker_queues)."""
    global _heartbeat
    queues = sender.app.amqp.queues.consume_from or sender.app.amqp.queues
    client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2)
    _heartbeat = Heartbeat(client, sender.hostname, list(queues))
    _heartbeat.start()


@worker_shutdown.connect
def _withdraw_queues(**_: Any) -> None:
    if _heartbeat is not None:
        _heartbeat.stop()
