"""The runs table and the compare view in Chromium against daphne: from the project page to
the table, sort by a metric, pick runs, compare them grouped by a setting. No cluster: runs
are staged with factories and the poll's own summary function."""

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.params import params_for_spec
from monitoring.models import LogFile
from monitoring.runs.summary import runs_record
from monitoring.series.write import series_append
from tests import factories
from tests.browser.test_page_facts import _log_in
from tests.helpers import screenshot, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

NOTES = Path("/work/notes")
STEPS = 3000


def _shot(page, name: str) -> None:
    path = screenshot(page, name)
    if NOTES.is_dir():
        (NOTES / f"{name}.png").write_bytes(path.read_bytes())


def _stage(project, owner) -> list[int]:
    cluster = factories.cluster("alps")
    ids = []
    for i, (lr, seed) in enumerate((lr, s) for lr in ("0.01", "0.001") for s in (1, 2, 3)):
        command = f"python train.py --lr {lr} --seed {seed} --batch-size 64"
        params, sources = params_for_spec(command=command, given={"model": "resnet50"})
        job, attempt = factories.job(
            project,
            owner,
            cluster,
            name=f"lr{lr}-s{seed}",
            command=command,
            params=params,
            param_sources=sources,
        )
        scale = 1.0 if lr == "0.01" else 1.6
        points = [
            (attempt.pk, "loss", float(step), scale * 3 / (1 + step / 200) + 0.02 * seed)
            for step in range(STEPS)
        ]
        if i == 0:
            points[1700] = (attempt.pk, "loss", 1700.0, 4.5)  # one bad step
        points += [(attempt.pk, "eval_accuracy", 2999.0, 0.9 - 0.01 * seed)]
        points += [(attempt.pk, "samples_per_sec", 2999.0, 2048.0 / scale)]
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})
        ids.append(job.pk)
    return ids


def test_runs_table_and_compare(asgi_server, project, owner, member, page) -> None:
    ids = _stage(project, owner)
    _log_in(page, asgi_server, member, f"/projects/{project.slug}/")
    page.click("#project-runs-link")
    page.wait_for_url("**/runs/")
    table = page.locator("#runs-table")
    assert table.locator("tbody tr").count() == 6
    assert table.locator("thead").get_by_text("lr", exact=True).count() == 1
    page.locator("#runs-table thead a[data-col=loss_best]").click()
    page.wait_for_url("**sort=-loss_best**")
    page.locator("#runs-table thead a[data-col=loss_best]").click()
    page.wait_for_url("**sort=loss_best**")
    first = table.locator("tbody tr").first.inner_text()
    assert "lr0.01-s1" in first  # the lowest loss: lr 0.01, seed 1
    page.fill("#runs-filters", "p.lr=0.001")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url("**f=p.lr**")
    assert table.locator("tbody tr").count() == 3
    page.goto(f"{asgi_server}/projects/{project.slug}/runs/?sort=p.seed")
    for box in page.locator(".run-pick").all():
        box.check()
    _shot(page, "runs17-runs-table")
    page.click("#compare-selected")
    page.wait_for_url("**/compare/?runs=**")
    wait_for(
        lambda: page.locator("#compare-chart .scatterlayer .trace").count() == 6, 60, "6 curves"
    )
    assert "runs" in page.locator("#compare-note").inner_text()
    diff = page.locator("#settings-diff").inner_text()
    assert "seed" in diff and "lr" in diff and "model" not in diff and "batch-size" not in diff
    _shot(page, "runs17-compare")
    page.select_option("#compare-group", "lr")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**group=lr**")
    # Two groups: a band (two edge traces) and a mean line each.
    wait_for(lambda: page.locator("#compare-chart .legendtext").count() == 2, 60, "2 groups")
    assert page.locator("#compare-chart .scatterlayer .trace").count() == 6
    shared = page.url
    _shot(page, "runs17-compare-grouped")
    page.goto(shared)  # the URL alone brings the same view back
    wait_for(lambda: page.locator("#compare-chart .legendtext").count() == 2, 60, "2 groups")
    assert page.locator("#compare-group").input_value() == "lr"
    assert len(ids) == 6


def test_compare_by_time_since_each_runs_start(asgi_server, project, owner, member, page) -> None:
    """Two runs of 100 steps, one twice as fast: by step they overlap, by time one ends first."""
    cluster = factories.cluster("alps")
    start = timezone.now() - timedelta(hours=1)
    ids = []
    for name, seconds in (("fast", 300), ("slow", 600)):
        job, attempt = factories.job(project, owner, cluster, name=name)
        attempt.started_at, attempt.ended_at = start, start + timedelta(seconds=seconds)
        attempt.save()
        LogFile.objects.create(attempt=attempt, name="stdout.log", last_step=100)
        points = [(attempt.pk, "loss", float(s), 3 / (1 + s)) for s in range(101)]
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})
        ids.append(job.pk)
    runs = ",".join(map(str, ids))
    _log_in(page, asgi_server, member, f"/projects/{project.slug}/compare/?runs={runs}")
    wait_for(lambda: page.locator("#compare-chart .scatterlayer .trace").count() == 2, 60, "curves")
    page.select_option("#compare-axis", "elapsed")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**axis=elapsed**")
    title = page.locator("#compare-chart .g-xtitle")
    wait_for(
        lambda: "time since the run's start (minutes)" in (title.text_content() or ""), 60, "axis"
    )
    assert page.locator("#compare-chart .scatterlayer .trace").count() == 2
    assert "estimated" in page.locator("#compare-clock").inner_text()
    _shot(page, "runs17-compare-time")
    page.goto(page.url)  # the shared URL keeps the axis
    assert page.locator("#compare-axis").input_value() == "elapsed"
