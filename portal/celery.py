"""The Celery app: Redis broker, JSON messages, settings under the CELERY_ prefix."""

import os
from typing import Any

import redis
from celery import Celery
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from portal_lib.worker_queues import Heartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")

app = Celery("portal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_heartbeat: Heartbeat | None = None


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
