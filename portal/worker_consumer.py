"""The Celery worker's consumer (settings.CELERY_WORKER_CONSUMER): back on the broker
within about a second of its return.

Celery reconnects through kombu's `ensure_connection` without intervals of its own, so
kombu's defaults apply: 2 s before the second try, then 4, 6, ... up to 30 s. A Redis
away for three seconds was found again three seconds after it came back, and nothing
was polled meanwhile (tests/chaos/test_redis_restart.py, issue 18). A try against a
broker that is down costs one refused connect, so trying every second is cheap.
"""

from functools import partial
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer

# Seconds before each further try: 0.2, 0.6, then every second.
RECONNECT = {"interval_start": 0.2, "interval_step": 0.4, "interval_max": 1.0}


class Consumer(CeleryConsumer):
    def ensure_connected(self, conn: Any) -> Any:
        conn.ensure_connection = partial(conn.ensure_connection, **RECONNECT)
        return super().ensure_connected(conn)
