"""The runs table at 50,000 runs of one project: ours (summaries stored by the poll, sort
and filter in SQL, a capped count, one page of rows) beside the naive way (every run and
its summary read, filtered and sorted in Python, counted with len()), in the same run.

Uses its own database `portal_bench_runs` on the local PostgreSQL (created and filled on
first use; later runs reuse the rows). Run: `.venv/bin/python bench/runs.py`. Prints,
per scenario, the median and p95 time of the whole page (view and template) and its
query count; ours must be the same count at every size.
"""

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_runs")

from benchdb import (  # noqa: E402 - after the path is set
    QUICK,
    comparison_row,
    ensure_database,
    measure,
)

RUNS = 500 if QUICK else 50_000
REPEATS = 2 if QUICK else 20
BATCH = 5_000
PAGE = 50
DEEP_PAGE = 5 if QUICK else 200
LRS = (0.1, 0.03, 0.01, 0.003, 0.001)
NAIVE_SCENARIOS = 5 if QUICK else 2
NAIVE_REPEATS = 2 if QUICK else 1


def _fill() -> None:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.db import connection
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Job
    from monitoring.models import RunSummary
    from projects.models import Membership, Project

    user, _ = User.objects.get_or_create(username="bench-user")
    project, _ = Project.objects.get_or_create(slug="bench-runs", defaults={"name": "Runs"})
    Membership.objects.get_or_create(user=user, project=project)
    cluster = Cluster.objects.filter(name="alps").first() or Cluster.objects.create(
        name="alps", ssh_host="login", host_key=new_key_pair()[1]
    )
    have = Job.objects.filter(project=project).count()
    if have >= RUNS:
        return
    print(f"filling {RUNS - have:,} runs ...", flush=True)
    started = time.perf_counter()
    states = [State.COMPLETED] * 6 + [State.FAILED, State.CANCELLED, State.RUNNING, State.TIMEOUT]
    for offset in range(have, RUNS, BATCH):
        numbers = range(offset, min(offset + BATCH, RUNS))
        jobs = Job.objects.bulk_create(
            [
                Job(
                    project=project,
                    user=user,
                    cluster=cluster,
                    name=f"run-{i:06d}",
                    command=f"python train.py --lr {LRS[i % 5]} --seed {i % 7}",
                    time_limit=timedelta(hours=1),
                    state=states[i % len(states)],
                    params={
                        "lr": LRS[i % 5],
                        "seed": i % 7,
                        "optimizer": ("adamw", "sgd")[i % 2],
                        "batch_size": 32 * (1 + i % 4),
                    },
                    param_sources={"lr": "command", "seed": "command"},
                )
                for i in numbers
            ],
            batch_size=BATCH,
        )
        RunSummary.objects.bulk_create(
            [
                RunSummary(
                    job=job,
                    project=project,
                    loss_last=1.0 + (i * 7919 % 1000) / 1000,
                    loss_best=0.5 + (i * 7919 % 1000) / 1000,
                    eval_name="eval_loss",
                    eval_best=0.6 + (i * 104729 % 1000) / 1000,
                    throughput=1000.0 + i % 500,
                    throughput_unit="samples",
                    mfu=0.3 + (i % 40) / 100,
                    gpu_hours=(i % 64) / 4,
                    duration_seconds=600.0 + i % 3600,
                    metrics={"loss": [1.0, 0.5, 2.0, 100.0]},
                )
                for i, job in zip(numbers, jobs, strict=True)
            ],
            batch_size=BATCH,
        )
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET created_at = %s - (%s - id) * interval '1 minute' "
            "WHERE project_id = %s",
            [timezone.now(), RUNS, project.pk],
        )
        cursor.execute("ANALYZE jobs_job")
        cursor.execute("ANALYZE monitoring_runsummary")
    print(f"filled in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.http import HttpRequest
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from jobs.models import Job
    from monitoring.runs.table import cell, column_title, default_columns, parse_filter
    from projects.models import Project
    from web.runs.views import runs_table

    call_command("migrate", verbosity=0)
    _fill()
    user = User.objects.get(username="bench-user")
    project = Project.objects.get(slug="bench-runs")
    factory = RequestFactory()

    def request(query: dict[str, Any]) -> HttpRequest:
        req = factory.get(f"/projects/{project.slug}/runs/", query)
        req.user = user
        return req

    def ours(query: dict[str, Any]) -> Callable[[], object]:
        return lambda: runs_table(request(query), project.slug).content

    def naive(query: dict[str, Any]) -> Callable[[], object]:
        """Every run with its summary in Python: filter, sort, count and slice there."""

        def render() -> object:
            rows = list(Job.objects.filter(project=project).select_related("summary", "user"))
            for text in query.get("f", []):
                flt = parse_filter(text)
                key = flt.column.removeprefix("p.")
                wanted = float(flt.value)
                rows = [r for r in rows if r.params.get(key) == wanted]
            sort = str(query.get("sort", "-created"))
            column = sort.lstrip("-")
            rows.sort(
                key=lambda r: (cell(r, column) is None, cell(r, column) or 0, r.pk),
                reverse=sort.startswith("-"),
            )
            page = int(query.get("page", 1))
            shown = rows[(page - 1) * PAGE : page * PAGE]
            columns = default_columns(["batch_size", "lr", "optimizer", "seed"])
            return render_to_string(
                "monitoring/runs.html",
                {
                    "project": project,
                    "headers": [{"key": c, "title": column_title(c)} for c in columns],
                    "rows": [
                        {"job": r, "cells": [{"key": c, "value": cell(r, c)} for c in columns]}
                        for r in shown
                    ],
                    "page": {"count": len(rows), "page": page, "pages": len(rows) // PAGE},
                    "columns": columns,
                    "offered": [],
                },
                request(query),
            )

        return render

    scenarios: list[tuple[str, dict[str, Any]]] = [
        ("newest first", {}),
        ("best loss first", {"sort": "loss_best"}),
        ("lr=0.001, by eval", {"sort": "eval_best", "f": ["p.lr=0.001"]}),
        (f"page {DEEP_PAGE}, by MFU", {"sort": "-mfu", "page": DEEP_PAGE}),
        ("by a setting", {"sort": "-p.batch_size"}),
    ]
    count = Job.objects.filter(project=project).count()
    print(f"{count:,} runs in the project; {REPEATS} runs each, {PAGE} rows a page")
    header = ("page", "ours med ms", "p95 ms", "queries", "naive med ms", "p95 ms", "queries")
    print(" | ".join(f"{h:>17}" for h in header))
    print("-" * 137)
    for number, (title, query) in enumerate(scenarios):
        mine = measure(ours(query), REPEATS)
        # The naive way takes a minute a page at full size: two scenarios show it.
        theirs = measure(naive(query), NAIVE_REPEATS) if number < NAIVE_SCENARIOS else None
        print(comparison_row(title, mine, theirs, width=17), flush=True)


if __name__ == "__main__":
    main()
