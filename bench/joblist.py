"""The job list page with 100,000 jobs: ours (keyset pages, capped count, one joined
query for the rows) beside the unoptimised way (OFFSET pages through Django's
Paginator, a full COUNT(*), related rows loaded one by one), measured in the same run.

Uses its own database `portal_bench_joblist` on the local PostgreSQL (created and
filled on first use; later runs reuse the rows).  Run: `.venv/bin/python bench/joblist.py`.
Prints, per scenario, the median and p95 time of rendering the whole page and its
query count.
"""

import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_joblist")

from benchdb import (  # noqa: E402 - after the path is set
    QUICK,
    comparison_row,
    ensure_database,
    measure,
)

JOBS = 500 if QUICK else 100_000
PROJECTS = 5  # the user is a member of the first three: 60,000 jobs to list
MEMBER_OF = 3
REPEATS = 2 if QUICK else 30
DEEP_PAGE = 5 if QUICK else 600  # the page a deep "Next" link leads past
BATCH = 5_000


def _fill() -> None:
    from datetime import timedelta

    from django.contrib.auth.models import User
    from django.utils import timezone

    from clusters.models import Cluster
    from devtools.keys import new_key_pair
    from jobs.enums import State, Template
    from jobs.models import Job
    from projects.models import Membership, Project

    user, _ = User.objects.get_or_create(username="bench-user")
    others = [User.objects.get_or_create(username=f"bench-{i}")[0] for i in range(4)]
    projects = [
        Project.objects.get_or_create(slug=f"bench-{i}", defaults={"name": f"Bench {i}"})[0]
        for i in range(PROJECTS)
    ]
    for project in projects[:MEMBER_OF]:
        Membership.objects.get_or_create(user=user, project=project)
    clusters = []
    for name in ("alps", "bern"):
        cluster = Cluster.objects.filter(name=name).first()
        if cluster is None:
            cluster = Cluster.objects.create(
                name=name, ssh_host="login", host_key=new_key_pair()[1]
            )
        clusters.append(cluster)
    have = Job.objects.count()
    if have >= JOBS:
        return
    states = [State.COMPLETED] * 6 + [State.FAILED, State.CANCELLED, State.RUNNING, State.PENDING]
    templates = list(Template.values)
    people = [user, *others]
    now = timezone.now()
    print(f"filling {JOBS - have:,} jobs ...", flush=True)
    started = time.perf_counter()
    for offset in range(have, JOBS, BATCH):
        Job.objects.bulk_create(
            [
                Job(
                    project=projects[i % PROJECTS],
                    user=people[i % len(people)],
                    cluster=clusters[i % 2],
                    name=f"run-{i:06d}-{('resnet', 'llama', 'vit', 'bert')[i % 4]}",
                    template=templates[i % len(templates)],
                    command="python train.py",
                    nodes=1 + i % 4,
                    gpus_per_node=i % 9,
                    time_limit=timedelta(hours=1),
                    state=states[i % len(states)],
                )
                for i in range(offset, min(offset + BATCH, JOBS))
            ],
            batch_size=BATCH,
        )
    # created_at is auto_now_add: spread it like a real history, one job a minute.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE jobs_job SET created_at = %s - (%s - id) * interval '1 minute'",
            [now, JOBS],
        )
        cursor.execute("ANALYZE jobs_job")
    print(f"filled in {time.perf_counter() - started:.1f} s", flush=True)


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.contrib.messages.storage.cookie import CookieStorage
    from django.core.management import call_command
    from django.core.paginator import Paginator
    from django.http import HttpRequest
    from django.template.loader import render_to_string
    from django.test import RequestFactory

    from jobs.listing import COUNT_CAP, Filters, access_for, job_page
    from jobs.models import Job
    from web.jobs.views import job_list

    call_command("migrate", verbosity=0)
    _fill()
    user = User.objects.get(username="bench-user")
    factory = RequestFactory()

    def request(query: dict[str, str]) -> HttpRequest:
        req = factory.get("/jobs/", query)
        req.user = user
        req._messages = CookieStorage(req)  # type: ignore[attr-defined]
        return req

    def ours(query: dict[str, str]) -> Callable[[], object]:
        return lambda: job_list(request(query)).content

    def naive(query: dict[str, str], page_number: int) -> Callable[[], object]:
        def render() -> object:
            jobs = Job.objects.filter(project__memberships__user=user)
            if query.get("state") == "finished":
                jobs = jobs.filter(state__in=["COMPLETED", "FAILED", "CANCELLED"])
            if query.get("q"):
                jobs = jobs.filter(name__icontains=query["q"])
            order = "name" if query.get("sort") == "name" else "-created_at"
            paginator = Paginator(jobs.order_by(order), 50)
            page = paginator.page(page_number)
            rows = [(job, job.user_id == user.pk) for job in page.object_list]
            return render_to_string(
                "jobs/list.html",
                {
                    "page": {"count": paginator.count, "clusters": []},
                    "rows": rows,
                    "filters": Filters.from_query(query),
                    "query": query,
                    "projects": [],
                    "states": [],
                    "sorts": [],
                    "count_cap": COUNT_CAP,
                },
                request(query),
            )

        return render

    visible = Job.objects.filter(project__memberships__user=user).count()
    # The keyset cursor of page 600 (30,000 jobs in), as its "Next" link would carry it.
    access = access_for(user=user)
    deep_job = (
        Job.objects.filter(project_id__in=access.project_ids).order_by("-id")[
            DEEP_PAGE * 50 - 1 : DEEP_PAGE * 50
        ]
    ).get()
    from jobs.listing import _encode

    deep_cursor = _encode(deep_job.pk, deep_job.pk)
    assert job_page(access=access, filters=Filters(), after=deep_cursor).jobs
    scenarios = [
        ("first page", {}, 1),
        (f"page {DEEP_PAGE + 1}", {"after": deep_cursor}, DEEP_PAGE + 1),
        ("finished + text", {"state": "finished", "q": "llama"}, 1),
        ("sorted by name", {"sort": "name"}, 1),
    ]
    print(f"{Job.objects.count():,} jobs, {visible:,} in the user's projects; {REPEATS} runs each")
    header = ("page", "ours med ms", "p95 ms", "queries", "naive med ms", "p95 ms", "queries")
    print(" | ".join(f"{h:>15}" for h in header))
    print("-" * 123)
    for title, query, number in scenarios:
        mine = measure(ours(query), REPEATS)
        theirs = measure(naive({k: v for k, v in query.items() if k != "after"}, number), REPEATS)
        print(comparison_row(title, mine, theirs), flush=True)


if __name__ == "__main__":
    main()
