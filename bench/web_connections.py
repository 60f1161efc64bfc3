"""The web process's PostgreSQL connections, three ways, side by side in one run.

- **pool (ours)**: borrowed from psycopg's pool and given back at each request's end
  (portal.web_database, the default);
- **a connection per request**: no pool, `CONN_MAX_AGE=0` (Django's advice under ASGI);
- **kept per thread (before)**: no pool, `CONN_MAX_AGE=60`, as the portal ran until
  2026-12-07: under ASGI each request's thread ends and its connection stays open until
  the garbage collector finds it.

Each way serves ROUNDS rounds of REQUESTS signed-in job-list pages, CONCURRENCY at a time,
from a daphne of its own started for the round (the ways take turns, so a busy moment
of the machine falls on all of them); after each round the backends the server still
holds are counted (`pg_stat_activity`, by application name). Uses its own database
`portal_bench_web` on the local PostgreSQL and Redis database 15. Needs no cluster.
Run: `.venv/bin/python bench/web_connections.py [--quick]`.
"""

import logging
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_web")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

from benchdb import QUICK, ensure_database  # noqa: E402

from devtools.servers import Daphne, running, server_env  # noqa: E402

ROUNDS = 1 if QUICK else 3
REQUESTS = 60 if QUICK else 300
CONCURRENCY = 12
POOL = "pool (ours)"
WAYS = {
    POOL: {},
    "a connection per request": {"DATABASE_POOL_MAX_SIZE": "0", "DATABASE_CONN_MAX_AGE": "0"},
    "kept per thread (before)": {"DATABASE_POOL_MAX_SIZE": "0", "DATABASE_CONN_MAX_AGE": "60"},
}
USERNAME = "bench-web-connections"


def _cookie() -> str:
    """A signed-in session of the bench's user, a member of a project."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from projects.models import Membership, Project

    user, _ = User.objects.get_or_create(username=USERNAME)
    project, _ = Project.objects.get_or_create(slug="bench-web", defaults={"name": "Bench web"})
    Membership.objects.get_or_create(user=user, project=project)
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def _held(application_name: str) -> int:
    from django.db import connection

    from portal.web_database import APPLICATION_NAME

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
            " AND application_name IN (%s, %s)",
            [application_name, APPLICATION_NAME],
        )
        return int(cursor.fetchone()[0])


def _round(url: str, cookie: str) -> tuple[list[float], int]:
    """(each request's ms, how many failed) of one round against the server at `url`."""
    import httpx
    from django.conf import settings

    def ask(_: int) -> tuple[float, bool]:
        started = time.perf_counter()
        answer = httpx.get(
            f"{url}/jobs/", cookies={settings.SESSION_COOKIE_NAME: cookie}, timeout=60
        )
        return (time.perf_counter() - started) * 1000, answer.status_code == 200

    with ThreadPoolExecutor(CONCURRENCY) as pool:
        done = list(pool.map(ask, range(REQUESTS)))
    return [ms for ms, _ in done], sum(1 for _, ok in done if not ok)


def main() -> None:
    ensure_database()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line per request otherwise
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    cookie = _cookie()
    base = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
    )
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    held: dict[str, list[int]] = {way: [] for way in WAYS}
    failed: dict[str, int] = dict.fromkeys(WAYS, 0)
    rate: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as workdir:
        for round_number in range(ROUNDS):
            for index, (way, extra) in enumerate(WAYS.items()):
                name = f"bench-web-{round_number}-{index}"  # its backends' application name
                env = {**base, **extra, "PGAPPNAME": name}
                with running(Daphne(env, Path(workdir))) as (server,):
                    _round(server.url, cookie)  # type: ignore[attr-defined]  # warm
                    started = time.perf_counter()
                    ms, bad = _round(server.url, cookie)  # type: ignore[attr-defined]
                    rate[way].append(REQUESTS / (time.perf_counter() - started))
                    held[way].append(_held(name))
                times[way] += ms
                failed[way] += bad
    print(f"{REQUESTS} signed-in job lists a round, {CONCURRENCY} at a time, {ROUNDS} rounds")
    print("| way | p50 ms | p95 ms | requests/s | backends held after a round | failed |")
    print("|---|---|---|---|---|---|")
    for way in WAYS:
        p50 = statistics.median(times[way])
        p95 = statistics.quantiles(times[way], n=20)[-1]
        print(
            f"| {way} | {p50:.1f} | {p95:.1f} | {statistics.median(rate[way]):.0f} "
            f"| {max(held[way])} | {failed[way]} |"
        )


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"({time.perf_counter() - started:.0f} s)")
