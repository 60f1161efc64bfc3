"""The Redis broker transport (settings.CELERY_BROKER_TRANSPORT): kombu's, except that a
lost Redis does not end the worker.

When the broker goes away Celery closes its connection and opens another, and kombu's
channels of the old one can still be asked to reach Redis: the close puts the worker's
unacknowledged messages back (tasks are acked late), and a task that finishes later acks
its message on the channel it came from. Both build a Redis client from the channel's
connection, which kombu has dropped by then: they raised AttributeError ("'NoneType'
object has no attribute 'hostname'", "... 'client'"), which Celery takes as
unrecoverable, and the worker exited (3 of 10 Redis restarts in issue 18, and runs of
tests/chaos/test_redis_restart.py), leaving polling to wait for supervise.

Here a channel without a connection raises the Redis connection error that Celery and
kombu already handle (a failed ack is logged, a close goes on), and the close leaves
the unacknowledged messages to the broker. They stay in Redis's unacked set and return
after the visibility timeout, or went with a Redis that restarted empty: tasks are hints,
the database is the truth, and beat sends the next poll within a second.
"""

import logging
from typing import Any

import redis.exceptions
from kombu.transport import redis as kombu_redis

logger = logging.getLogger(__name__)


def _connected(channel: Any) -> bool:
    transport = getattr(channel, "connection", None)
    return getattr(transport, "client", None) is not None


class QoS(kombu_redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        if client is None and not _connected(self.channel):
            delivered = self._delivered if self._delivered is not None else {}
            logger.warning(
                "broker connection closed: %d unacknowledged message(s) left to Redis's"
                " visibility timeout",
                len(delivered),
            )
            delivered.clear()
            return None
        return super().restore_unacked(client)


class Channel(kombu_redis.Channel):
    QoS = QoS

    def _connparams(self, asynchronous: bool = False) -> Any:
        if not _connected(self):
            raise redis.exceptions.ConnectionError("this broker channel's connection is closed")
        return super()._connparams(asynchronous=asynchronous)  # type: ignore[misc]


class Transport(kombu_redis.Transport):
    Channel = Channel
