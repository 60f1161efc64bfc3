"""How long similar jobs waited (jobs.queue.waits.similar_waits) over a large history.

Fills its own database `portal_bench_queue` on the local PostgreSQL (first run only)
with ATTEMPTS started attempts on one cluster over 8 weeks, spread over 4 partitions,
1/2/4 nodes and 1/2/4/8 GPUs per node, then times the header's one query for a common
spec (many matches: capped at MAX_WAIT_SAMPLES) and a rare one.
Run: `.venv/bin/python bench/queue_waits.py` (`--quick`: a small history).
"""

import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_queue")

from benchdb import QUICK, ensure_database  # noqa: E402 - after the path is set

ATTEMPTS = 2_000 if QUICK else 100_000
REPEATS = 5 if QUICK else 30
BATCH = 5_000


def _fill() -> None:
    import random
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from projects.models import Project

    cluster = Cluster.objects.filter(name="bench-queue").first()
    if cluster is not None and Attempt.objects.filter(job__cluster=cluster).count() >= ATTEMPTS:
        return
    user, _ = User.objects.get_or_create(username="bench-queue")
    project, _ = Project.objects.get_or_create(slug="bench-queue", defaults={"name": "Bench"})
    if cluster is None:
        cluster = Cluster.objects.create(
            name="bench-queue", ssh_host="login", host_key=new_key_pair()[1]
        )
    rng = random.Random(19)
    now = timezone.now()
    done = Attempt.objects.filter(job__cluster=cluster).count()
    while done < ATTEMPTS:
        n = min(BATCH, ATTEMPTS - done)
        jobs = Job.objects.bulk_create(
            Job(
                project=project,
                user=user,
                cluster=cluster,
                name="b",
                command="x",
                partition=rng.choice(["", "gpu", "big", "debug"]),
                nodes=rng.choice([1, 2, 4]),
                gpus_per_node=rng.choice([1, 2, 4, 8]),
            )
            for _ in range(n)
        )
        attempts = []
        for job in jobs:
            submitted = now - timedelta(seconds=rng.uniform(0, 8 * 7 * 86400))
            wait = timedelta(seconds=rng.expovariate(1 / 600))
            attempts.append(
                Attempt(
                    job=job,
                    number=1,
                    state=State.COMPLETED,
                    submitted_at=submitted,
                    started_at=submitted + wait,
                    ended_at=submitted + wait + timedelta(hours=1),
                )
            )
        Attempt.objects.bulk_create(attempts)
        done += n


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from clusters.models import Cluster
    from jobs.queue.waits import similar_waits

    call_command("migrate", verbosity=0)
    _fill()
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum would have by now
    cluster = Cluster.objects.get(name="bench-queue")
    print(f"{ATTEMPTS} attempts on one cluster; {REPEATS} runs each")
    print(f"{'shape':20} | {'median ms':>9} | {'p95 ms':>7} | queries | samples | typical wait")
    for label, nodes, gpus in (("common (gpu, 1x1)", 1, 1), ("rare (gpu, 4x8)", 4, 8)):
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            with CaptureQueriesContext(connection) as queries:
                waits = similar_waits(
                    cluster_id=cluster.pk,
                    partition="gpu",
                    nodes=nodes,
                    gpus_per_node=gpus,
                    now=timezone.now(),
                )
            times.append(time.perf_counter() - start)
        ms = sorted(t * 1000 for t in times)
        p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
        print(
            f"{label:20} | {statistics.median(ms):9.1f} | {p95:7.1f} | {len(queries):7} | "
            f"{waits.count:7} | {waits.typical}"
        )


if __name__ == "__main__":
    main()
