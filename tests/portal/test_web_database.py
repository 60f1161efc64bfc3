"""The web process borrows its database connections from a bounded pool (portal.web_database).

Before: under ASGI each request's connection stayed open after its request, in a thread
that had ended, until the garbage collector found it: 300 requests, 8 at a time, left 11
to 16 idle PostgreSQL backends, and a page retrying its requests for minutes reached
PostgreSQL's max_connections, refusing every other process (a CI run, issue 39).
"""

from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection

from devtools.servers import Daphne, running
from jobs.models import Job
from monitoring.live import slots
from portal.web_database import APPLICATION_NAME, pooled
from tests.fixtures.servers import live_env
from tests.helpers import session_cookie

POOL = 3


def _held() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = %s",
            [APPLICATION_NAME],
        )
        return int(cursor.fetchone()[0])


@pytest.mark.django_db(transaction=True)
def test_many_requests_at_once_hold_no_more_connections_than_the_pool(tmp_path) -> None:
    env = {**live_env(), "DATABASE_POOL_MIN_SIZE": "1", "DATABASE_POOL_MAX_SIZE": str(POOL)}
    with running(Daphne(env, tmp_path)) as (daphne,):
        url = f"{daphne.url}/jobs/"  # type: ignore[attr-defined]

        def ask(_: int) -> int:
            # An unknown session key: the session is looked up in the database.
            cookies = {"sessionid": "x" * 32}
            return httpx.get(url, cookies=cookies, timeout=60).status_code

        with ThreadPoolExecutor(12) as requests:
            answers = list(requests.map(ask, range(240)))
        assert set(answers) == {302}  # to the login page, every one (none refused for want)
        assert 1 <= _held() <= POOL


@pytest.mark.django_db(transaction=True)
def test_open_live_streams_leave_the_pool_to_the_pages(tmp_path, job: Job, owner: User) -> None:
    """A live stream reads the database twice a second for up to an hour: streams open
    past the pool's size (each borrows for its reads only) leave it to the pages."""
    env = {**live_env(), "DATABASE_POOL_MIN_SIZE": "1", "DATABASE_POOL_MAX_SIZE": str(POOL)}
    cookies = {settings.SESSION_COOKIE_NAME: session_cookie(owner)}
    slots.slots_clear(kind=slots.SSE, user_id=owner.pk)
    with running(Daphne(env, tmp_path)) as (daphne,), ExitStack() as streams:
        url = daphne.url  # type: ignore[attr-defined]
        http = streams.enter_context(httpx.Client(base_url=url, cookies=cookies, timeout=60))
        for _ in range(POOL + 2):
            stream = streams.enter_context(
                http.stream("GET", f"/api/v1/jobs/{job.pk}/attempts/1/log/stream")
            )
            assert stream.status_code == 200
            assert b"event: log" in next(stream.iter_raw())  # under way, and it stays open
        page = httpx.get(f"{url}/jobs/", cookies=cookies, timeout=60)
        assert page.status_code == 200 and "resnet" in page.text


def test_sqlite_has_no_pool() -> None:
    database = {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 60}
    pooled(database, min_size=1, max_size=2)
    assert database == {"ENGINE": "django.db.backends.sqlite3", "CONN_MAX_AGE": 60}


def test_postgresql_is_pooled_and_named() -> None:
    database = {"ENGINE": "django.db.backends.postgresql", "CONN_MAX_AGE": 60, "OPTIONS": {}}
    pooled(database, min_size=1, max_size=2)
    assert database["CONN_MAX_AGE"] == 0  # Django refuses a pool beside persistent ones
    assert database["CONN_HEALTH_CHECKS"] is True
    assert database["OPTIONS"] == {
        "application_name": APPLICATION_NAME,
        "pool": {"min_size": 1, "max_size": 2},
    }
