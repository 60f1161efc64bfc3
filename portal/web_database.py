"""The web process's database connections: a pool, not one kept per thread.

Under ASGI, Django runs each request's database work in a thread of that request's own
(asgiref's ThreadSensitiveContext). A persistent connection (CONN_MAX_AGE) outlives its
request in a thread that has ended, and stays open until the garbage collector finds it
(Django ticket #33497; Django's documentation says to disable persistent connections under
ASGI): a busy page held a dozen idle PostgreSQL backends, and a page retrying its requests
reached PostgreSQL's max_connections, refusing every other process. The web process
instead borrows from a bounded pool (psycopg_pool, through Django's "pool" option) and gives
the connection back when its request ends. Celery's workers keep theirs (portal.celery).
"""

from typing import Any

from django.apps import apps
from django.conf import settings

APPLICATION_NAME = "portal-web"
POSTGRESQL = "django.db.backends.postgresql"


def pooled(database: dict[str, Any], *, min_size: int, max_size: int) -> None:
    """Make `database` (a DATABASES entry on PostgreSQL) borrow from a pool."""
    if database["ENGINE"] != POSTGRESQL:
        return  # SQLite, the local run's default: one file, no server to run out of
    database["CONN_MAX_AGE"] = 0  # given back at the end of each request
    # Each connection is checked as it is borrowed: one PostgreSQL dropped (a restart) is
    # replaced before a request gets it.
    database["CONN_HEALTH_CHECKS"] = True
    options = database.setdefault("OPTIONS", {})
    options.setdefault("application_name", APPLICATION_NAME)
    options["pool"] = {"min_size": min_size, "max_size": max_size}


def pool_web_connections() -> None:
    """Called by portal.asgi before Django is set up. A process that set Django up before
    (a test importing the application) keeps its connections as they are."""
    if apps.ready or settings.DATABASE_POOL_MAX_SIZE <= 0:
        return  # 0: no pool (a pooler in front, say); then set DATABASE_CONN_MAX_AGE=0
    pooled(
        settings.DATABASES["default"],
        min_size=settings.DATABASE_POOL_MIN_SIZE,
        max_size=settings.DATABASE_POOL_MAX_SIZE,
    )
