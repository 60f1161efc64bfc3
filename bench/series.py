"""A million-point series: the chunked store's downsampled reads against reading every point.

Uses its own database `portal_bench` on the local PostgreSQL (created if missing).
Run: `.venv/bin/python bench/series.py`.  Appends 1,000,000 points in poll-sized
batches, times poll cycles of 299 other attempts x 42 series, then reads the series
full-range and zoomed (1%) both ways: `series_read` (max 2000 points) and the naive
way, one row per point in a table of (x, y) with every point in range sent to the
browser.  Prints a table and deletes its rows.
"""

import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK, ensure_database  # noqa: E402 - after the path is set

POINTS = 20_000 if QUICK else 1_000_000
BATCH = 500  # points per series per poll, the upper end of what a poll brings
REPEATS = 1 if QUICK else 5
OTHERS = 20 if QUICK else 299  # attempts whose poll cycle is timed
ZOOM = (POINTS * 0.495, POINTS * 0.505)  # 1% of the steps
T = TypeVar("T")


def _median_ms(action: Callable[[], T]) -> tuple[float, T]:
    result = action()  # warm
    times = []
    for _ in range(REPEATS):
        started = time.perf_counter()
        result = action()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000, result


def main() -> None:
    ensure_database()
    import django

    django.setup()
    import numpy as np
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.models import Attempt, Job
    from monitoring.models import Series
    from monitoring.series.read import series_read
    from monitoring.series.write import series_append
    from projects.models import Project

    call_command("migrate", verbosity=0)
    tag = uuid.uuid4().hex[:6]
    user = User.objects.create_user(f"bench-{tag}")
    project = Project.objects.create(slug=f"bench-{tag}", name="Bench", slurm_account="bench")
    cluster = Cluster.objects.create(
        name=f"bench-{tag}", ssh_host="login", host_key=new_key_pair()[1]
    )

    def new_attempt() -> Attempt:
        job = Job.objects.create(
            project=project, user=user, cluster=cluster, name="train", command="python train.py"
        )
        return Attempt.objects.create(job=job, number=1)

    attempt = new_attempt()
    others = [new_attempt() for _ in range(OTHERS)]
    try:
        rng = np.random.default_rng(0)
        xs = np.arange(POINTS, dtype=np.float64)
        ys = np.exp(-xs / 2e5) + rng.normal(0, 0.05, POINTS)
        ys[rng.integers(0, POINTS, 20)] += 5.0  # loss spikes
        x_list, y_list = xs.tolist(), ys.tolist()

        started = time.perf_counter()
        for start in range(0, POINTS, BATCH):
            stop = start + BATCH
            series_append(
                points=[
                    (attempt.pk, "loss", x, y)
                    for x, y in zip(x_list[start:stop], y_list[start:stop], strict=True)
                ]
            )
        append_s = time.perf_counter() - started

        names = ["loss", "lr"] + [
            f"gpu/n1/{gpu}/{metric}"
            for gpu in range(8)
            for metric in ("utilization", "memory_used", "temperature", "power", "sm_clock")
        ]
        cycle_ms = []
        for second in range(3 if QUICK else 20):  # 20 polls: one compaction per series in there
            cycle = [(a.pk, name, 1.7e9 + second, 50.0) for a in others for name in names]
            started = time.perf_counter()
            series_append(points=cycle)
            cycle_ms.append((time.perf_counter() - started) * 1000)

        def ours(x_from: float | None = None, x_to: float | None = None) -> tuple[str, int]:
            read = series_read(attempt_id=attempt.pk, name="loss", x_from=x_from, x_to=x_to)
            return json.dumps({"x": read.xs, "y": read.ys}), len(read.xs)

        with connection.cursor() as cursor:
            cursor.execute("CREATE TEMPORARY TABLE bench_point (x float8 NOT NULL, y float8)")
            with cursor.cursor.copy("COPY bench_point (x, y) FROM STDIN") as copy:
                for row in zip(x_list, y_list, strict=True):
                    copy.write_row(row)
            cursor.execute("CREATE INDEX ON bench_point (x)")
            cursor.execute("ANALYZE bench_point")

        def naive(x_from: float = -np.inf, x_to: float = np.inf) -> tuple[str, int]:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT x, y FROM bench_point WHERE x BETWEEN %s AND %s ORDER BY x",
                    [x_from, x_to],
                )
                rows = cursor.fetchall()
            return json.dumps({"x": [r[0] for r in rows], "y": [r[1] for r in rows]}), len(rows)

        rows = []
        for label, action in (
            ("ours, full range", ours),
            ("naive, full range", naive),
            ("ours, zoom 1%", lambda: ours(*ZOOM)),
            ("naive, zoom 1%", lambda: naive(*ZOOM)),
        ):
            ms, (payload, count) = _median_ms(action)
            rows.append((label, ms, count, len(payload) / 1024))
        read_ms, _ = _median_ms(lambda: series_read(attempt_id=attempt.pk, name="loss"))

        print(
            f"append: {POINTS:,} points in batches of {BATCH}: {append_s:.1f} s"
            f" = {POINTS / append_s:,.0f} points/s"
        )
        print(
            f"poll cycle: {len(others)} attempts x {len(names)} series x 1 point:"
            f" median {statistics.median(cycle_ms):.0f} ms, max {max(cycle_ms):.0f} ms"
        )
        print(f"series_read alone, full range, 2000 points: median {read_ms:.1f} ms")
        print()
        print(f"{'read + JSON (median of 5)':<26} | {'ms':>8} | {'points':>9} | {'JSON KiB':>9}")
        print("-" * 61)
        for label, ms, count, kib in rows:
            print(f"{label:<26} | {ms:8.1f} | {count:9,} | {kib:9,.0f}")
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE IF EXISTS bench_point")
        Series.objects.filter(attempt__job__project=project).delete()
        Job.objects.filter(project=project).delete()
        cluster.delete()
        project.delete()
        user.delete()


if __name__ == "__main__":
    main()
