"""Poll-path ingest rate: 1,000 running attempts x 40 series, binary COPY beside plain SQL.

Drives the poll's real ingest (`MonitoringWatcher.ingest`: log bytes stored, lines
parsed in the parser process, points and parser state written) with what the agent
would bring each second: one new `metrics.jsonl` line of 40 values and one stdout
line per attempt. Each poll is timed twice, in one run: with bulk writes by binary
COPY (PostgreSQL's default here) and with plain statements (`BULK_COPY=False`: what
SQLite gets, and the statements every database got before COPY: `unnest` arrays for
the series, Django's `bulk_create` / `bulk_update` for the rest). Both run on the
same tables (the series tables' indexes and fill factor as migrated). The storage
alone (log bytes, points, parser state, without the parse) is timed as well.

Uses its own database `portal_bench_ingest` on the local PostgreSQL.
Run: `.venv/bin/python bench/ingest.py [--quick]`.
"""

import json
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_ingest")

from benchdb import QUICK, delete_jobs_without_charges, ensure_database  # noqa: E402

ATTEMPTS = 50 if QUICK else 1000
SERIES = 40
POLLS = 3 if QUICK else 10  # timed polls per path (after one warm-up each)
GOAL = 50_000


def _attempts(tag: str) -> list[Any]:
    from django.contrib.auth.models import User

    from clusters.models import Cluster, ClusterAccount
    from devtools.keys import new_key_pair
    from jobs.models import Attempt, Job, State
    from projects.models import Project

    user = User.objects.create_user(f"bench-ingest-{tag}")
    project = Project.objects.create(slug=f"bench-ingest-{tag}", name="Bench ingest")
    cluster = Cluster.objects.create(
        name=f"bench-ingest-{tag}", ssh_host="login", host_key=new_key_pair()[1]
    )
    account = ClusterAccount.objects.create(
        cluster=cluster, user=user, username="bench", private_key="x"
    )
    jobs = Job.objects.bulk_create(
        Job(project=project, user=user, cluster=cluster, name="train", command="x")
        for _ in range(ATTEMPTS)
    )
    Attempt.objects.bulk_create(
        Attempt(job=job, number=1, account=account, state=State.RUNNING, run_dir=f"/runs/{job.pk}")
        for job in jobs
    )
    return list(Attempt.objects.filter(job__project=project).select_related("job", "job__cluster"))


def _reply(attempts: list[Any], step: int, sizes: dict[tuple[int, str], int]) -> Any:
    """What the agent brings in one poll: a metrics line and a stdout line per attempt."""
    from clusters.agent import AgentReply, FileChunk
    from jobs.rundir import METRICS_FILE, STDOUT_FILE, file_key

    metrics = {"step": step, **{f"metric_{i}": 1.0 / (step + i + 1) for i in range(SERIES)}}
    lines = {
        METRICS_FILE: json.dumps(metrics).encode() + b"\n",
        STDOUT_FILE: b"epoch 1 batch %d: training\n" % step,
    }
    files = {}
    for attempt in attempts:
        for name, data in lines.items():
            offset = sizes.get((attempt.pk, name), 0)
            sizes[(attempt.pk, name)] = offset + len(data)
            files[file_key(attempt.uuid, name)] = FileChunk(
                offset=offset, data=data, size=offset + len(data), more=False, error=None, inode=1
            )
    return AgentReply(time=time.time(), files=files)


def _poll_times(attempts: list[Any], copy: bool) -> tuple[list[float], list[float], int]:
    """(seconds per whole ingest, seconds of its storage alone, points per poll)."""
    from django.test.utils import override_settings

    from monitoring import ingest, ingest_write, logs
    from monitoring.ingest import MonitoringWatcher

    stored_in: list[float] = []

    def timed(function: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*args, **kwargs)
            finally:
                stored_in[-1] += time.perf_counter() - started

        return run

    sizes: dict[tuple[int, str], int] = {}
    whole: list[float] = []
    points = 0
    real_store, real_write = logs.log_store, ingest_write.ingest_write
    ingest.log_store, ingest.ingest_write = timed(real_store), timed(real_write)
    try:
        with override_settings(BULK_COPY=copy):
            for step in range(POLLS + 1):
                reply = _reply(attempts, step, sizes)
                stored_in.append(0.0)
                started = time.perf_counter()
                watcher = MonitoringWatcher()
                watcher.requests(attempts)
                watcher.ingest(attempts, reply)
                whole.append(time.perf_counter() - started)
            points = ATTEMPTS * SERIES
    finally:
        ingest.log_store, ingest.ingest_write = real_store, real_write
    return whole[1:], stored_in[1:], points


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    tag = uuid.uuid4().hex[:6]
    rows = []
    try:
        for label, copy in (("plain SQL (before)", False), ("binary COPY", True)):
            # Fresh attempts per path: each starts from the same empty series.
            attempts = _attempts(f"{tag}-{int(copy)}")
            whole, stored, points = _poll_times(attempts, copy)
            rows.append((label, points, whole, stored))
    finally:
        from projects.models import Project

        for project in Project.objects.filter(slug__startswith=f"bench-ingest-{tag}"):
            delete_jobs_without_charges(project=project)
    load = os.getloadavg()[0]
    print(
        f"{ATTEMPTS:,} attempts x {SERIES} series, 1 point each per poll; {POLLS} polls per"
        f" path (median); load average {load:.1f} on {os.cpu_count()} cores"
    )
    header = ("write path", "points/poll", "ingest ms", "points/s", "storage ms", "points/s")
    print(" | ".join(f"{h:>18}" if i == 0 else f"{h:>11}" for i, h in enumerate(header)))
    print("-" * 90)
    for label, points, whole, stored in rows:
        total, storage = statistics.median(whole), statistics.median(stored)
        print(
            f"{label:>18} | {points:>11,} | {total * 1000:>11.0f} | {points / total:>11,.0f} |"
            f" {storage * 1000:>11.0f} | {points / storage:>11,.0f}"
        )
    print(f"goal: {GOAL:,} points/s through the whole ingest")


if __name__ == "__main__":
    main()
