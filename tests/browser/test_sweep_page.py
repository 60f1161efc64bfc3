"""The sweep page in Chromium against daphne: from the project page to its sweeps, then a
sweep's parallel coordinates (one line per trial), its best trial and its trials. No
cluster: the trials are staged as the tick leaves them."""

from datetime import timedelta

import pytest

from jobs.enums import State
from sweeps.models import Sweep, Trial
from tests import factories
from tests.browser.test_page_facts import _log_in
from tests.browser.test_runs import _shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LRS = [0.05, 0.02, 1e-5, 7e-6, 5e-6, 3e-6, 2e-6, 1e-6]


def _stage(project, owner) -> Sweep:
    cluster = factories.cluster("alps")
    sweep = Sweep.objects.create(
        project=project,
        user=owner,
        cluster=cluster,
        name="lr sweep",
        command="portal-examples/ddp_train.py --steps 40 --lr {lr}",
        time_limit=timedelta(minutes=10),
        space={"lr": {"type": "float", "low": 1e-6, "high": 0.05, "log": True}},
        sampler=Sweep.Sampler.RANDOM,
        report_every=5,
        max_trials=8,
        state=Sweep.State.DONE,
    )
    for number, lr in enumerate(LRS):
        good = lr > 1e-3
        job, _ = factories.job(
            project, owner, cluster, name=f"lr sweep trial {number}", nodes=2 if number == 1 else 1
        )
        job.state = State.COMPLETED if good or number == 2 else State.CANCELLED
        job.save()
        # The 2-node trial's rate learns a little better.
        fall = (1 + number) / 400
        losses = {str(s): (0.25 - s * fall if good else 0.66 + s / 1000) for s in (5, 10)}
        if good or number == 2:
            losses.update({str(s): (0.25 - s * fall if good else 0.66) for s in range(15, 45, 5)})
        Trial.objects.create(
            sweep=sweep,
            number=number,
            params={"lr": lr},
            nodes=job.nodes,
            job=job,
            state=Trial.State.COMPLETE if good or number == 2 else Trial.State.PRUNED,
            intermediate=losses,
            value=losses.get("40"),
            note="" if good or number == 2 else "Pruned at step 10: loss 0.67.",
        )
    return sweep


def test_the_sweep_page_shows_parallel_coordinates(asgi_server, project, owner, page) -> None:
    sweep = _stage(project, owner)
    _log_in(page, asgi_server, owner, f"/projects/{project.slug}/")
    page.click("#project-sweeps-link")
    page.wait_for_url("**/sweeps/")
    page.get_by_role("link", name="lr sweep").click()
    page.wait_for_url(f"**/sweeps/{sweep.pk}/")
    chart = page.locator("#sweep-parcoords[data-ready='1']")
    chart.wait_for()
    # Plotly's parallel coordinates: one axis per setting (log10 of lr), nodes, the metric.
    titles = page.locator("#sweep-parcoords .parcoords .axis-title").all_text_contents()
    assert titles == ["log10(lr)", "nodes", "loss"], titles
    assert "Trial 1: loss" in page.locator("#best-trial").inner_text()
    rows = page.locator("#trials-table tbody tr")
    assert rows.count() == 8
    assert page.locator("#trials-table tr[data-state=pruned]").count() == 5
    _shot(page, "sweeps17-sweep-page")
