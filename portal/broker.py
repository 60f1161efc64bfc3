"""The Redis broker transport (settings.CELERY_BROKER_TRANSPORT): kombu's, except that a
lost Redis does not end the worker.

When the broker goes away Celery closes its connection, and closing a channel makes
kombu put the worker's unacknowledged messages back (tasks are acked late) through the
connection's parameters. Where the connection had already dropped its transport, that
raised AttributeError ("'NoneType' object has no attribute 'hostname'"), which Celery
takes as unrecoverable: the worker exited, in 3 of 10 Redis restarts in issue 18 and
in both of tests/chaos/test_redis_restart.py's, and polling waited for supervise to
start another. With no connection left, the messages are left to the broker: they stay
in Redis's unacked set and return after the visibility timeout, or went with a Redis
that restarted empty. Either way nothing is lost that matters: tasks are hints, the
database is the truth, and beat sends the next poll within a second.
"""

import logging
from typing import Any

from kombu.transport import redis

logger = logging.getLogger(__name__)


class QoS(redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        transport = getattr(self.channel, "connection", None)
        if client is None and getattr(transport, "client", None) is None:
            delivered = self._delivered if self._delivered is not None else {}
            logger.warning(
                "broker connection closed: %d unacknowledged message(s) left to Redis's"
                " visibility timeout",
                len(delivered),
            )
            delivered.clear()
            return None
        return super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
