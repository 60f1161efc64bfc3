"""Compare 20 runs x 100,000 points: the server's time for all curves, ours (each run
downsampled to the chart's width through the chunk summaries, min and max per pixel
column) beside reading every point of every run, and the same for one run, in one run.

Uses its own database `portal_bench_compare` on the local PostgreSQL (created and filled
on first use; later runs reuse the rows). Run: `.venv/bin/python bench/compare.py`.
Goal: all 20 curves in under 300 ms. Also checks that the one-step spike of one run is in
its downsampled curve.
"""

import os
import sys
import time
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_compare")

from benchdb import (  # noqa: E402 - after the path is set
    QUICK,
    comparison_row,
    ensure_database,
    measure,
)

RUNS = 3 if QUICK else 20
POINTS = 5_000 if QUICK else 100_000
WIDTH = 1000  # the chart's width in pixels
REPEATS = 2 if QUICK else 10
SPIKE = (0, POINTS * 3 // 5 + 17, 100.0)  # (run, step, value): one step, one point


def _fill() -> list[int]:
    from datetime import timedelta

    import numpy as np
    from django.contrib.auth.models import User

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.models import Job
    from monitoring.series.write import series_append
    from projects.models import Project

    user, _ = User.objects.get_or_create(username="bench-user")
    # One project per size: a quick run's rows are never mixed into a full run's.
    slug = f"bench-compare-{POINTS}"
    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    cluster = Cluster.objects.filter(name="alps").first() or Cluster.objects.create(
        name="alps", ssh_host="login", host_key=new_key_pair()[1]
    )
    jobs = list(Job.objects.filter(project=project).order_by("id"))
    if len(jobs) >= RUNS:
        return [job.pk for job in jobs[:RUNS]]
    print(f"filling {RUNS} runs x {POINTS:,} points ...", flush=True)
    started = time.perf_counter()
    steps = np.arange(POINTS, dtype=np.float64)
    for run in range(RUNS):
        job = Job.objects.create(
            project=project,
            user=user,
            cluster=cluster,
            name=f"seed-{run}",
            command="python train.py",
            time_limit=timedelta(hours=1),
            params={"lr": (0.1, 0.01)[run % 2], "seed": run},
        )
        attempt = job.attempts.create(number=1)
        rng = np.random.default_rng(run)
        loss = 3.0 / np.sqrt(steps + 1) + rng.normal(0, 0.02, POINTS)
        if run == SPIKE[0]:
            loss[SPIKE[1]] = SPIKE[2]
        points = [
            (attempt.pk, "loss", float(x), float(y)) for x, y in zip(steps, loss, strict=True)
        ]
        for at in range(0, POINTS, 50_000):  # a backfill of poll-sized appends is slower still
            series_append(points=points[at : at + 50_000])
        jobs.append(job)
    print(f"filled in {time.perf_counter() - started:.1f} s", flush=True)
    return [job.pk for job in jobs[:RUNS]]


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from datetime import timedelta

    import numpy as np
    from django.core.management import call_command
    from django.utils import timezone

    from jobs.models import Attempt, Job
    from monitoring.models import SeriesChunk
    from monitoring.runs.compare import Curve, curves_read, group_bands
    from monitoring.series.chunks import decode

    call_command("migrate", verbosity=0)
    ids = _fill()
    jobs = list(Job.objects.filter(pk__in=ids).order_by("id"))

    # Each run took an hour (the time axes estimate each step's time from it).
    began = timezone.now() - timedelta(hours=2)
    Attempt.objects.filter(job__in=jobs).update(
        started_at=began, ended_at=began + timedelta(hours=1)
    )

    def ours(chosen: list[Job], axis: str = "step") -> list[Curve]:
        curves = curves_read(jobs=chosen, metric="loss", width=WIDTH, axis=axis)
        group_bands(curves, {j.pk: j.params["lr"] for j in chosen}, width=WIDTH)
        return curves

    def every_point(chosen: list[Job]) -> list[tuple[list[float], list[float]]]:
        """Every chunk's points decoded, per run, sorted by step: what a naive chart gets."""
        curves = []
        for job in chosen:
            chunks = SeriesChunk.objects.filter(
                series__attempt__job=job, series__name="loss"
            ).values_list("data", flat=True)
            parts = [decode(bytes(data)) for data in chunks]
            xs = np.concatenate([p[0] for p in parts])
            ys = np.concatenate([p[1] for p in parts])
            order = np.argsort(xs, kind="stable")
            curves.append((xs[order].tolist(), ys[order].tolist()))
        return curves

    curves = ours(jobs)
    spiky = curves[0]
    assert SPIKE[2] in spiky.ys, "the one-step spike is missing from the downsampled curve"
    assert spiky.xs[spiky.ys.index(SPIKE[2])] == SPIKE[1]
    drawn = sum(len(c.xs) for c in curves)
    print(
        f"{len(jobs)} runs x {POINTS:,} points, chart {WIDTH} px: {drawn:,} points drawn; "
        f"the spike at step {SPIKE[1]} is kept; {REPEATS} runs each"
    )
    header = ("curves", "ours med ms", "p95 ms", "queries", "every point ms", "p95 ms", "queries")
    print(" | ".join(f"{h:>15}" for h in header))
    print("-" * 123)
    rows = [
        (f"all {len(jobs)}", partial(ours, jobs), jobs),
        (f"all {len(jobs)} by time", partial(ours, jobs, "elapsed"), jobs),
        ("one run", partial(ours, jobs[:1]), jobs[:1]),
    ]
    for title, read, chosen in rows:
        mine = measure(read, REPEATS)
        theirs = measure(partial(every_point, chosen), max(REPEATS // 2, 2))
        print(comparison_row(title, mine, theirs), flush=True)


if __name__ == "__main__":
    main()
