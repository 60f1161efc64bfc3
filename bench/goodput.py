"""Goodput per project, user and week over 50,000 ended attempts: ours (the cards' part
columns summed in SQL, grouped by ISO week) beside reading every card's JSON and summing
in Python, measured in the same run; and the digest's worst jobs of a week.

Uses its own database `portal_bench_goodput` on the local PostgreSQL (created and
filled on first use; later runs reuse the rows).  Run: `.venv/bin/python bench/goodput.py`.
Prints, per read, the median and p95 time and its query count.
"""

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_goodput")

from benchdb import QUICK, ensure_database, measure  # noqa: E402 - after the path is set

ATTEMPTS = 2_000 if QUICK else 50_000  # two per job
PROJECTS = 5
USERS = 10
WEEKS = 26  # of history, ending this week
REPEATS = 3 if QUICK else 20
BATCH = 5_000


def _fill() -> None:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from monitoring.goodput.efficiency import PARTS
    from monitoring.models import EfficiencyCard
    from projects.models import Membership, Project

    people = [User.objects.get_or_create(username=f"bench-{i}")[0] for i in range(USERS)]
    projects = [
        Project.objects.get_or_create(slug=f"bench-{i}", defaults={"name": f"Bench {i}"})[0]
        for i in range(PROJECTS)
    ]
    for i, user in enumerate(people):
        Membership.objects.get_or_create(user=user, project=projects[i % PROJECTS])
    cluster = Cluster.objects.filter(name="alps").first() or Cluster.objects.create(
        name="alps", ssh_host="login", host_key=new_key_pair()[1]
    )
    have = EfficiencyCard.objects.count()
    if have >= ATTEMPTS:
        return
    print(f"filling {ATTEMPTS - have:,} attempts with cards ...", flush=True)
    started = time.perf_counter()
    now = timezone.now()
    for offset in range(have // 2, ATTEMPTS // 2, BATCH // 2):
        stop = min(offset + BATCH // 2, ATTEMPTS // 2)
        jobs = Job.objects.bulk_create(
            [
                Job(
                    project=projects[i % PROJECTS],
                    user=people[(i % PROJECTS) + PROJECTS * (i // PROJECTS % 2)],
                    cluster=cluster,
                    name=f"run-{i:06d}",
                    command="python train.py",
                    time_limit=timedelta(hours=4),
                    state=State.COMPLETED,
                )
                for i in range(offset, stop)
            ]
        )
        attempts = Attempt.objects.bulk_create(
            [Attempt(job=job, number=n, state=State.COMPLETED) for job in jobs for n in (1, 2)]
        )
        cards = []
        for k, attempt in enumerate(attempts):
            i = offset * 2 + k
            hours = {part: float((i * (p + 3)) % 7) for p, part in enumerate(PARTS)}
            total = sum(hours.values())
            ended = now - timedelta(minutes=(i * 37) % (WEEKS * 7 * 24 * 60))
            cards.append(
                EfficiencyCard(
                    attempt=attempt,
                    data={"gpu_hours": total, "parts": hours, "queued_gpu_hours": 1.0},
                    from_ledger=True,
                    ended_at=ended,
                    gpu_hours=total,
                    queued_gpu_hours=1.0,
                    **{f"{part}_gpu_hours": value for part, value in hours.items()},
                )
            )
        EfficiencyCard.objects.bulk_create(cards)
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE monitoring_efficiencycard")
        cursor.execute("ANALYZE jobs_attempt")
        cursor.execute("ANALYZE jobs_job")
    print(f"filled in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from collections import defaultdict
    from datetime import timedelta

    from django.core.management import call_command

    from monitoring.goodput.efficiency import PARTS
    from monitoring.goodput.report import (
        cards_in_weeks,
        goodput_rows,
        project_goodput,
        wasted_jobs,
        week_start,
    )
    from monitoring.models import EfficiencyCard
    from projects.models import Project

    call_command("migrate", verbosity=0)
    _fill()
    project = Project.objects.get(slug="bench-0")
    from django.utils import timezone

    this_week = week_start(timezone.localdate())
    first = this_week - timedelta(weeks=WEEKS - 1)

    def naive_all_weeks() -> dict[tuple[object, ...], dict[str, float]]:
        """Every card loaded with its job, its JSON summed in Python."""
        sums: dict[tuple[object, ...], dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for card in EfficiencyCard.objects.select_related(
            "attempt__job__project", "attempt__job__user"
        ).iterator(chunk_size=2000):
            week = week_start(timezone.localtime(card.ended_at).date())
            key = (week, card.attempt.job.project.slug, card.attempt.job.user.username)
            for part in PARTS:
                sums[key][part] += card.data["parts"][part]
            sums[key]["gpu_hours"] += card.data["gpu_hours"]
        return sums

    scenarios: list[tuple[str, Callable[[], object]]] = [
        ("project page (8 weeks)", lambda: project_goodput(project_id=project.pk)),
        (
            "admin, all, by user",
            lambda: goodput_rows(
                cards_in_weeks(first=first, last=this_week), by=("project", "user")
            ),
        ),
        (
            "digest: worst jobs",
            lambda: wasted_jobs(project_id=project.pk, week=this_week - timedelta(weeks=1)),
        ),
        ("naive: all in Python", naive_all_weeks),
    ]
    # The two must agree before their times mean anything.
    ours = goodput_rows(cards_in_weeks(first=None, last=None), by=("project", "user"))
    naive = naive_all_weeks()
    assert len(ours) == len(naive)
    for row in ours:
        other = naive[(row.week, row.project, row.user)]
        assert abs(row.gpu_hours - other["gpu_hours"]) < 1e-6

    print(f"{EfficiencyCard.objects.count():,} cards over {WEEKS} weeks; {REPEATS} runs each")
    header = ("read", "median ms", "p95 ms", "queries")
    print(" | ".join(f"{h:>22}" for h in header))
    print("-" * 95)
    for title, action in scenarios:
        median, p95, queries = measure(action, REPEATS)
        print(" | ".join(f"{v:>22}" for v in (title, f"{median:.1f}", f"{p95:.1f}", queries)))


if __name__ == "__main__":
    main()
