"""The benchmarks' own database, `portal_bench` on the local PostgreSQL, made if missing;
and `--quick` (or BENCH_QUICK=1): small sizes, so that the suite runs every bench."""

import asyncio
import json
import os
import re
import shlex
import statistics
import sys
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from decimal import Decimal
from typing import Any

QUICK = "--quick" in sys.argv[1:] or os.environ.get("BENCH_QUICK") == "1"

os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.test"
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench")


def ensure_database() -> None:
    import psycopg

    url = os.environ["DATABASE_URL"]
    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')


def fresh_database(url: str) -> None:
    """Drop and make again the database at `url`: a revision's own schema, from nothing."""
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def delete_jobs_without_charges(**filters: object) -> None:
    """Delete the bench's jobs, except those the ledger charged (its rows are immutable)."""
    from jobs.models import Job

    Job.objects.filter(**filters).exclude(attempts__usage_charge__isnull=False).delete()


def measure(action: Callable[[], object], repeats: int) -> tuple[float, float, int]:
    """(median ms, p95 ms, queries of the last run) of `action`, after one warm-up run."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    action()  # warm
    times = []
    queries = 0
    for _ in range(repeats):
        connection.queries_log.clear()  # a full log (9,000) would make the count read 0
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            action()
            times.append(time.perf_counter() - started)
        queries = len(captured)
    times.sort()
    p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
    return statistics.median(times) * 1000, p95 * 1000, queries


Timing = tuple[float, float, int]  # what measure() returns


def comparison_row(title: str, ours: Timing, theirs: Timing | None, width: int = 15) -> str:
    """One table row: the title, then median, p95 and queries of ours and of the other way."""
    cells: list[object] = [title, f"{ours[0]:.1f}", f"{ours[1]:.1f}", ours[2]]
    if theirs is None:
        cells += ["-", "-", "-"]
    else:
        cells += [f"{theirs[0]:.1f}", f"{theirs[1]:.1f}", theirs[2]]
    return " | ".join(f"{cell:>{width}}" for cell in cells)


def jobs_cancel_on_slurm(*, jobs: list[Any], user: Any) -> None:
    """Cancel the bench's jobs in the portal and scancel them as alice on Slurm.

    The worker that would send the portal's cancels may be gone (a bench stops it before
    its `finally`), and a job left running holds the sandbox's GPUs from whatever runs
    next (a 2-node job of bench/hang.py outlived a whole test run so). A job that has
    ended already is skipped.
    """
    from clusters.models import ClusterAccount
    from clusters.selectors import account_endpoint
    from clusters.ssh import Connection
    from jobs.models import Attempt
    from jobs.services import job_cancel

    for job in jobs:
        job_cancel(job=job, user=user)
    live = Attempt.objects.filter(job__in=jobs).exclude(slurm_job_id="").select_related("job")
    by_cluster: dict[Any, list[str]] = {}
    for attempt in live:
        if not attempt.is_finished:
            by_cluster.setdefault(attempt.job.cluster, []).append(attempt.slurm_job_id)
    for cluster, ids in by_cluster.items():
        account = ClusterAccount.objects.get(cluster=cluster, username="alice")
        with Connection(account_endpoint(account=account)) as alice:
            for start in range(0, len(ids), 500):
                argv = cluster.slurm_tools.wrap(["scancel", *ids[start : start + 500]])
                alice.run(shlex.join(argv), timeout=60)


def bench_cluster() -> Any:
    """The sandbox, up and registered as the bench's cluster.

    Under the suite (tests/benches), its run directories carry the run's tag, as the
    suite's own clusters' do, so that the suite's end finds any job a bench left running
    (`squeue` lists its output path) and cancels it.
    """
    from django.conf import settings

    from clusters import sandbox
    from clusters.services import cluster_register_sandbox

    cluster = cluster_register_sandbox(info=sandbox.up(settings.SANDBOX_STATE_DIR))
    tag = os.environ.get("PORTAL_TEST_RUN")
    if tag:
        cluster.base_run_dir = f"{cluster.base_run_dir.rstrip('/')}/{tag}-bench"
        cluster.save(update_fields=["base_run_dir"])
    return cluster


def bench_project(*, user: Any, slug: str, name: str) -> Any:
    """A project of the bench's with a roomy quota, `user` a member of it."""
    from projects.models import Membership, Project, Quota

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": name})
    Quota.objects.get_or_create(
        project=project,
        defaults={"gpu_hours_per_period": Decimal("1000"), "max_wall_time": timedelta(hours=1)},
    )
    Membership.objects.get_or_create(
        user=user, project=project, defaults={"role": Membership.Role.MEMBER}
    )
    return project


def session_headers(user: Any) -> tuple[Any, dict[str, str]]:
    """A logged-in session of `user` (delete it when done) and the Cookie header for it."""
    from django.conf import settings
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = str(user.pk)
    session["_auth_user_backend"] = "django.contrib.auth.backends.ModelBackend"
    session["_auth_user_hash"] = user.get_session_auth_hash()
    session.save()
    return session, {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session.session_key}"}


# A line a bench's job prints: its number and when it was printed (the machine's clock).
MARK = re.compile(r"^MARK (\d+) (\d+\.\d+)$")


def hold_page(
    url: str, headers: dict[str, str], origin: str, stop: threading.Event, arrived: dict[int, float]
) -> None:
    """A job's page, as a browser holds it: its WebSocket open until `stop`
    (opened again a second after the server closes it). Its lease makes the job one with
    a page open (jobs.poll.open_pages); `arrived` gets the latency on the page of each line
    `MARK <seq> <unix time printed>`."""
    asyncio.run(_page(url, headers, origin, stop, arrived))


async def _page(
    url: str, headers: dict[str, str], origin: str, stop: threading.Event, arrived: dict[int, float]
) -> None:
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.typing import Origin

    while not stop.is_set():
        carry = ""
        try:
            async with connect(
                url, origin=Origin(origin), additional_headers=headers, open_timeout=20
            ) as ws:
                while not stop.is_set():
                    try:
                        raw = await asyncio.wait_for(ws.recv(), 0.5)
                    except TimeoutError:
                        continue
                    received = time.time()
                    log = json.loads(raw).get("log") or {}
                    if log.get("file") != "stdout.log" or log.get("text") is None:
                        carry = ""  # offsets only (too big): the page reads these over REST
                        continue
                    *lines, carry = (carry + log["text"]).split("\n")
                    for line in lines:
                        match = MARK.match(line.strip())
                        if match:
                            arrived.setdefault(int(match[1]), received - float(match[2]))
        except (ConnectionClosed, InvalidStatus, OSError, TimeoutError):
            await asyncio.sleep(1.0)
