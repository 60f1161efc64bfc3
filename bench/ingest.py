"""Poll-path ingest rate: 1,000 running attempts x 40 series, binary COPY beside plain SQL.

Drives the poll's real ingest (`MonitoringWatcher.ingest`: log bytes stored, lines
parsed in the parser process, points and parser state written, run summaries, alerts,
the WebSocket deltas) with what the agent would bring each second: one new
`metrics.jsonl` line of 40 values and one stdout line per attempt. Each poll is timed
twice, in one run: with bulk writes by binary COPY (PostgreSQL's default here) and
with plain statements (`BULK_COPY=False`: what SQLite gets, and the statements every
database got before COPY: `unnest` arrays for the series, Django's `bulk_create` /
`bulk_update` for the rest). Both run on the same tables (the series tables' indexes
and fill factor as migrated). The storage alone (log bytes, points, parser state,
without the parse) is timed as well.

`--against REF` (say `--against main`) first runs this bench as it is in the git
revision REF, with that revision's code (`git archive`, same Python) on a database of
its own made afresh (`<database>_against`: a revision migrates its own schema), and
prints its rows above ours: the path as it was beside the path as it is, in one run.
This run's database is vacuumed first (autovacuum may be off: the rows earlier runs
deleted would be scanned again). The machine is shared: compare rows of one run, not
numbers across runs.

Measured with `--against 854548c` at 027ab21 (2 shared cores, load average 1.0; median of
10 polls of 40,000 points), since JSON in the poll path goes through orjson
(`portal_lib.json_codec`: the parser's frames both ways, each metrics.jsonl record, the run
summaries' and reader states' JSON fields; the standard library still reads what orjson
refuses, NaN among it) and the WebSocket deltas are built after the commit for the jobs
with a page open only: through the whole ingest with COPY, 0.89 s a poll (44,700 points/s)
before, 0.63 s (63,700) now; plain SQL 3.6 s against 3.4 s; the storage alone with COPY
0.25 s against 0.22 s. `make bench` from a fresh clone of 9a647a0 measured 0.71 s, 56,700
points/s: the goal, 50,000 points/s through the whole ingest, is met. (The day before,
on a busier machine, the code of 5b11823 and c1688f7 gave 24,700 and 27,800: compare rows
of one run.) What is left of a poll is mostly PostgreSQL's: the COPYs and UPDATEs of the
points, the log rows and the thousand run summaries (each row's indexed summary columns
change every poll, so no update is HOT).

Uses its own database `portal_bench_ingest` on the local PostgreSQL.
Run: `.venv/bin/python bench/ingest.py [--quick] [--against REF]`.
"""

import io
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_ingest")

from benchdb import (  # noqa: E402
    QUICK,
    delete_jobs_without_charges,
    ensure_database,
    fresh_database,
)

ATTEMPTS = 50 if QUICK else 1000
SERIES = 40
POLLS = 3 if QUICK else 10  # timed polls per path (after one warm-up each)
GOAL = 50_000


def _attempts(tag: str) -> list[Any]:
    from django.contrib.auth.models import User

    from clusters.models import Cluster, ClusterAccount
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
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

    from monitoring.ingest import watch as ingest
    from monitoring.ingest import write as ingest_write
    from monitoring.ingest.watch import MonitoringWatcher
    from monitoring.logs import store as logs

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


def _against() -> str | None:
    args = sys.argv[1:]
    if "--against" not in args:
        return None
    at = args.index("--against") + 1
    if at >= len(args):
        sys.exit("--against needs a git revision, e.g. --against main")
    return args[at]


def _their_rows(ref: str) -> list[str]:
    """The table rows this bench prints at revision `ref`, run with that revision's code."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True
    ).stdout
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tree:
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tree, filter="data")
        command = [sys.executable, str(Path(tree) / "bench" / "ingest.py")]
        command += ["--quick"] if QUICK else []
        # Its own database, made afresh: the revision migrates its own schema.
        url = os.environ["DATABASE_URL"] + "_against"
        fresh_database(url)
        env = {**os.environ, "DATABASE_URL": url}
        done = subprocess.run(
            command, cwd=tree, capture_output=True, text=True, env=env, check=False
        )
    if done.returncode:
        sys.exit(f"bench at {ref} failed:\n{done.stderr[-3000:]}")
    rows = [line for line in done.stdout.splitlines() if line.count("|") == 5 and "," in line]
    return [
        f"{ref + ': ' + row.split('|', 1)[0].strip():>30} |{row.split('|', 1)[1]}" for row in rows
    ]


def _vacuum() -> None:
    """Dead rows of earlier runs out, statistics fresh: where autovacuum is off (this box's
    PostgreSQL), every run would otherwise scan all the rows the runs before it deleted."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")


def main() -> None:
    ref = _against()
    theirs = _their_rows(ref) if ref is not None else []
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    _vacuum()
    tag = uuid.uuid4().hex[:6]
    rows = []
    try:
        for label, copy in (("plain SQL", False), ("binary COPY", True)):
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
    print(" | ".join(f"{h:>30}" if i == 0 else f"{h:>11}" for i, h in enumerate(header)))
    print("-" * 102)
    for row in theirs:
        print(row)
    for label, points, whole, stored in rows:
        total, storage = statistics.median(whole), statistics.median(stored)
        name = f"this code: {label}" if ref is not None else label
        print(
            f"{name:>30} | {points:>11,} | {total * 1000:>11.0f} | {points / total:>11,.0f} |"
            f" {storage * 1000:>11.0f} | {points / storage:>11,.0f}"
        )
    print(f"goal: {GOAL:,} points/s through the whole ingest")


if __name__ == "__main__":
    main()
