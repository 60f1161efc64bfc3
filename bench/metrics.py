"""A /metrics scrape with many running jobs: its time, size and query count by job count.

Uses its own database `portal_bench` on the local PostgreSQL (created if missing).
Run: `.venv/bin/python bench/metrics.py`.  Makes running attempts of 8 GPUs each
(four GPU series per GPU, an MFU and a pace), scrapes them through the endpoint's
own collector, prints a table and deletes its rows.
"""

import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK, delete_jobs_without_charges, ensure_database  # noqa: E402

SIZES = (10, 50) if QUICK else (10, 100, 500)
GPUS = 8
REPEATS = 2 if QUICK else 10
SLUG = "bench-metrics"


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from monitoring.models import AttemptProgress
    from monitoring.prometheus.exposition import metrics_text
    from monitoring.series.write import series_append
    from projects.models import Project

    call_command("migrate", verbosity=0)
    user, _ = User.objects.get_or_create(username="bench-metrics")
    project, _ = Project.objects.get_or_create(slug=SLUG, defaults={"name": "Bench metrics"})
    cluster = Cluster.objects.filter(name=SLUG).first() or Cluster.objects.create(
        name=SLUG, ssh_host="login", host_key=new_key_pair()[1]
    )
    # Other benches' running attempts would be scraped too: count them in, say so.
    elsewhere = Attempt.objects.filter(state=State.RUNNING).exclude(job__project=project).count()

    def add(count: int) -> None:
        now = timezone.now()
        points = []
        for _ in range(count):
            job = Job.objects.create(
                project=project, user=user, cluster=cluster, name="bench", command="x",
                time_limit=timedelta(hours=1), nodes=1, gpus_per_node=GPUS,
            )  # fmt: skip
            attempt = Attempt.objects.create(
                job=job, number=1, state=State.RUNNING, node_list="n1", started_at=now
            )
            stamp = now.timestamp()
            for gpu in range(GPUS):
                for metric in ("utilization", "memory_used", "power", "temperature"):
                    points.append((attempt.pk, f"gpu/n1/{gpu}/{metric}", stamp, 50.0))
            points.append((attempt.pk, "mfu", 1.0, 0.4))
            AttemptProgress.objects.create(
                attempt=attempt, pace=[[stamp - 10 + i, float(i)] for i in range(10)]
            )
        series_append(points=points)

    print(f"{GPUS} GPUs per job; {REPEATS} scrapes each; {elsewhere} other running attempts")
    header = ("running jobs", "median ms", "max ms", "queries", "bytes")
    print(" | ".join(f"{h:>12}" for h in header))
    print("-" * 72)
    made = 0
    try:
        for size in SIZES:
            add(size - made)
            made = size
            metrics_text()  # warm
            times = []
            for _ in range(REPEATS):
                with CaptureQueriesContext(connection) as queries:
                    started = time.perf_counter()
                    text = metrics_text()
                    times.append(time.perf_counter() - started)
            row = (
                f"{size:,}",
                f"{statistics.median(times) * 1000:.1f}",
                f"{max(times) * 1000:.1f}",
                str(len(queries)),
                f"{len(text):,}",
            )
            print(" | ".join(f"{cell:>12}" for cell in row))
    finally:
        delete_jobs_without_charges(project=project)


if __name__ == "__main__":
    main()
