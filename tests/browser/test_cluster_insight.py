"""The cluster page's queue insight in Chromium, as staff: every project's line, a pending
job's reason in plain words with Slurm's code on hover, and the last week's waits drawn per
partition; nothing scrolls sideways at phone width. No cluster: rows staged with factories."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.queue.line import wait_reason
from projects.models import Membership, Project
from tests import factories
from tests.helpers import browser_log_in, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _staged(project: Project, user: User, cluster: Cluster, name: str, state: State, **facts):
    job, attempt = factories.job(project, user, cluster, name=name, state=state)
    Job.objects.filter(pk=job.pk).update(state=state)
    Attempt.objects.filter(pk=attempt.pk).update(state=state, **facts)
    return job


def test_staff_read_the_lines_the_reasons_and_the_waits(
    asgi_server, project: Project, member: User, staff: User, page
) -> None:
    cluster = factories.cluster("alps")
    Cluster.objects.filter(pk=cluster.pk).update(ssh_host="127.0.0.1", ssh_port=1)
    nlp = Project.objects.create(slug="nlp", name="NLP", slurm_account="nlp")
    sam = User.objects.create_user("sam")
    Membership.objects.create(user=sam, project=nlp, role=Membership.Role.OWNER)
    why = wait_reason("project nlp has 2 of its 2 concurrent GPUs in use and this job needs 1")
    _staged(nlp, sam, cluster, "queued-up", State.WAITING, reason=why)
    _staged(project, member, cluster, "over-cap", State.PENDING, slurm_job_id="77",
            slurm_reason="AssocGrpGRES", submitted_at=timezone.now())  # fmt: skip
    now = timezone.now()
    for n, (partition, minutes) in enumerate([("gpu", 2), ("gpu", 4), ("gpu", 9), ("debug", 1)]):
        at = now - timedelta(hours=n + 1)
        job, attempt = factories.job(project, member, cluster, partition=partition)
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.COMPLETED, submitted_at=at, started_at=at + timedelta(minutes=minutes)
        )
        Job.objects.filter(pk=job.pk).update(state=State.COMPLETED)

    browser_log_in(page, asgi_server, staff)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{asgi_server}/clusters/alps/")
    line = page.locator("#line-table tr[data-job]", has_text="queued-up")
    assert "1 of 1" in line.inner_text() and "Waiting for room: project nlp" in line.inner_text()
    pending = page.locator("#pending-table tr[data-job]", has_text="over-cap")
    reason = pending.locator("[data-reason-code]")
    assert reason.inner_text() == (
        "The project's Slurm account has reached its limit on GPUs (or other generic resources)."
    )
    assert reason.get_attribute("title") == "Slurm's reason: AssocGrpGRES"
    assert "None of your projects" not in page.locator("main").inner_text()

    waits = page.locator("#waits-table")
    assert "4 min" in waits.locator("tr", has_text="gpu").inner_text()  # the median of 2, 4, 9
    page.locator("#chart-waits .main-svg").first.wait_for()
    traces = page.evaluate(
        """() => document.getElementById('chart-waits').data.map((t) =>
        ({name: t.name, y: Array.from(t.y)}))"""
    )
    assert {t["name"]: t["y"] for t in traces} == {"debug": [1], "gpu": [9, 4, 2]}
    chart_text = page.locator("#chart-waits").text_content() or ""
    assert "wait (minutes)" in chart_text and "submitted" in chart_text  # the axes named
    screenshot(page, "cluster-queue-insight")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    page.locator("#chart-waits .main-svg").first.wait_for()
    # Once drawn at the phone's width (Plotly sizes the chart to its box as it draws).
    page.wait_for_function("document.documentElement.scrollWidth <= 390", timeout=10_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
