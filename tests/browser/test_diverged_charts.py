"""Charts beside a diverged run, in Chromium against daphne: the compare chart fits its y
axis to the other runs and says which run is off, its log toggle shows every run whole;
the sweep chart leaves the diverged trial out, says so, and prints plain ticks (never
`1.2x10<sup>17</sup>` with a times sign). No cluster: runs and trials are staged as the poll and the tick
leave them."""

import math
from datetime import timedelta

import pytest

from jobs.enums import State
from monitoring.series.write import series_append
from sweeps.models import Sweep, Trial
from tests import factories
from tests.browser.test_page_facts import _log_in
from tests.browser.test_runs import _shot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMES = "\N{MULTIPLICATION SIGN}"  # Plotly's power-of-ten ticks: 1.2 times 10^17

# The diverged trial: a loss falling from 2.3, then 1.6e6, inf, nan, 1.28e17.
DIVERGED = {
    **{s: 2.3 - 0.02 * s for s in range(1, 23)},
    23: 1.6e6,
    24: math.inf,
    25: math.nan,
    26: 1.28e17,
}


def _compare_runs(project, owner) -> list[int]:
    cluster = factories.cluster("alps")
    ids = []
    for name, losses in (
        ("diverged", DIVERGED),
        ("lr 0.01", {s: 2.2 - 0.01 * s for s in range(1, 27)}),
        ("lr 0.003", {s: 2.3 - 0.012 * s for s in range(1, 27)}),
    ):
        job, attempt = factories.job(project, owner, cluster, name=name)
        series_append(points=[(attempt.pk, "loss", float(s), v) for s, v in losses.items()])
        ids.append(job.pk)
    return ids


def test_compare_fits_the_y_axis_beside_a_diverged_run(asgi_server, project, owner, page) -> None:
    ids = _compare_runs(project, owner)
    runs = ",".join(map(str, ids))
    _log_in(page, asgi_server, owner, f"/projects/{project.slug}/compare/?runs={runs}")
    note = page.locator("#compare-range")
    note.wait_for()
    assert "diverged #" in note.inner_text() and "1.28e+17" in note.inner_text()
    assert "2 NaN or infinite values shown as gaps" in page.locator("#compare-note").inner_text()
    top = page.evaluate("document.getElementById('compare-chart').layout.yaxis.range[1]")
    assert 2.0 < top < 2.5
    _shot(page, "compare-diverged-fitted")
    page.check("#compare-log")
    page.wait_for_function("document.getElementById('compare-chart').layout.yaxis.type === 'log'")
    assert note.is_hidden()
    assert "log=1" in page.url  # the URL holds the view
    ticks = page.locator("#compare-chart .ytick text").all_text_contents()
    assert ticks and not any(TIMES in tick for tick in ticks), ticks
    _shot(page, "compare-diverged-log")


def test_the_sweep_chart_leaves_a_diverged_trial_out(asgi_server, project, owner, page) -> None:
    cluster = factories.cluster("alps")
    sweep = Sweep.objects.create(
        project=project,
        user=owner,
        cluster=cluster,
        name="lr sweep",
        command="python train.py --lr {lr}",
        time_limit=timedelta(minutes=10),
        space={"lr": {"type": "float", "low": 1e-5, "high": 1.0, "log": True}},
        sampler=Sweep.Sampler.RANDOM,
        max_trials=4,
        state=Sweep.State.DONE,
    )
    for number, (lr, value) in enumerate(((0.9, None), (0.01, 1.21), (0.001, 1.5), (3e-4, 1.9))):
        job, _ = factories.job(project, owner, cluster, name=f"lr sweep trial {number}")
        job.state = State.CANCELLED if value is None else State.COMPLETED
        job.save()
        Trial.objects.create(
            sweep=sweep,
            number=number,
            params={"lr": lr},
            nodes=1,
            job=job,
            state=Trial.State.PRUNED if value is None else Trial.State.COMPLETE,
            diverged=value is None,
            intermediate={"10": 2.1, "20": 1.9} if value is None else {"20": value},
            value=value,
            note="Diverged at step 23: loss 1.6e+06, orders of magnitude past its best 1.86."
            if value is None
            else "",
        )
    _log_in(page, asgi_server, owner, f"/sweeps/{sweep.pk}/")
    page.locator("#sweep-parcoords[data-ready='1']").wait_for()
    assert "Not drawn: trial 0, pruned as diverged" in page.locator("#sweep-diverged").inner_text()
    assert page.locator("#trial-0").get_by_text("Pruned (diverged)").count() == 1
    ticks = page.locator("#sweep-parcoords .parcoords .tick text").all_text_contents()
    assert ticks and not any(TIMES in t or "sup" in t for t in ticks), ticks
    _shot(page, "sweep-diverged")
