"""The compare page in Chromium at a laptop's size and a phone's (390x844): the runs it
leaves out named with why, the series selector, both axes named, log scale and smoothing
kept in the URL, the page with no run picked saying how to pick some; and the job page's
log scale and smoothing, the same shared script (static/js/chart-scale.js). No cluster:
runs are staged with the poll's own writers."""

import pytest

from monitoring.runs.summary import runs_record
from monitoring.series.write import series_append
from tests import factories
from tests.helpers import browser_log_in, screenshot, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SIZES = {"desktop": {"width": 1440, "height": 900}, "phone": {"width": 390, "height": 844}}
STEPS = 400
SPIKE = 200
CHART = "document.getElementById('compare-chart')"


def _run(project, owner, cluster, name: str, series: dict[str, float], params: dict):
    job, attempt = factories.job(project, owner, cluster, name=name, params=params)
    points = [
        (attempt.pk, metric, float(s), (9.0 if s == SPIKE else scale * 3 / (1 + s / 50)))
        for metric, scale in series.items()
        for s in range(1, STEPS + 1)
    ]
    if points:
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})
    return job


def _stage(project, owner, cluster) -> list:
    """Three runs logging `loss` (one spike each at step SPIKE), a Hugging Face one logging
    `train_loss` and `eval_loss`, and one that has logged nothing yet."""
    return [
        _run(project, owner, cluster, "lr-a", {"loss": 1.0}, {"lr": 0.1}),
        _run(project, owner, cluster, "lr-b", {"loss": 1.2}, {"lr": 0.1}),
        _run(project, owner, cluster, "lr-c", {"loss": 0.8}, {"lr": 0.01}),
        _run(project, owner, cluster, "hf", {"train_loss": 1.0, "eval_loss": 1.1}, {"lr": 0.1}),
        _run(project, owner, cluster, "queued", {}, {"lr": 0.1}),
    ]


def _traces(page) -> int:
    return page.locator("#compare-chart .scatterlayer .trace").count()


def _smooth(page, slider: str, value: str) -> None:
    page.evaluate(
        """([slider, value]) => { const el = document.querySelector(slider); el.value = value;
        el.dispatchEvent(new Event("input", { bubbles: true })); }""",
        [slider, value],
    )


@pytest.mark.parametrize("size", SIZES)
def test_compare_says_what_it_left_out_and_scales_like_the_job_page(
    asgi_server, project, owner, member, cluster, page, size
) -> None:
    runs = _stage(project, owner, cluster)
    page.set_viewport_size(SIZES[size])
    browser_log_in(page, asgi_server, member)
    ids = ",".join(str(job.pk) for job in runs)
    page.goto(f"{asgi_server}/projects/{project.slug}/compare/?runs={ids}")
    wait_for(lambda: _traces(page) == 3, 60, "three loss curves")
    left = page.locator("#compare-left-out")
    assert left.is_visible()
    text = left.inner_text()
    assert "Left out of the chart: 2 of 5 runs asked for." in text
    assert f"hf #{runs[3].pk} has no “loss” series (it logs eval_loss, train_loss)." in text
    assert f"queued #{runs[4].pk} has logged no points yet." in text
    assert page.locator("#compare-chart .g-xtitle").text_content() == "step"
    assert page.locator("#compare-chart .g-ytitle").text_content() == "loss"
    raw_top = page.evaluate(f"Math.max(...{CHART}.data[0].y)")
    assert raw_top == 9.0  # the spike, drawn as logged
    page.check("#compare-log")
    wait_for(lambda: page.evaluate(f"{CHART}.layout.yaxis.type") == "log", 30, "a log y axis")
    _smooth(page, "#compare-smooth", "0.9")
    wait_for(lambda: page.evaluate(f"Math.max(...{CHART}.data[0].y)") < 3.0, 30, "smoothed curves")
    assert page.locator("#compare-smooth-value").inner_text() == "0.90"
    assert "log=1" in page.url and "smooth=0.9" in page.url
    if size == "phone":
        assert page.evaluate("document.documentElement.scrollWidth") <= SIZES["phone"]["width"]
    screenshot(page, f"compare-left-out-log-smooth-{size}")
    page.goto(page.url)  # the URL alone brings the same view back
    wait_for(lambda: _traces(page) == 3, 60, "the curves again")
    assert page.locator("#compare-log").is_checked()
    assert page.evaluate(f"{CHART}.layout.yaxis.type") == "log"
    assert page.evaluate(f"Math.max(...{CHART}.data[0].y)") < 3.0
    # The Hugging Face run's own series: it alone is drawn, the others are said left out.
    page.select_option("#compare-metric", "train_loss")
    page.get_by_role("button", name="Show").click()
    page.wait_for_url("**metric=train_loss**")
    wait_for(lambda: _traces(page) == 1, 60, "the train_loss curve")
    assert page.locator("#compare-chart .g-ytitle").text_content() == "train_loss"
    assert f"lr-a #{runs[0].pk} has no “train_loss” series (it logs loss)." in left.inner_text()
    screenshot(page, f"compare-series-picked-{size}")


def test_with_no_run_picked_it_says_how_and_its_link_leads_to_picking_some(
    asgi_server, project, owner, member, cluster, page
) -> None:
    """The empty page's hint read as it says: its link to the runs, two ticked, compared."""
    runs = _stage(project, owner, cluster)[:2]
    page.set_viewport_size(SIZES["phone"])
    browser_log_in(page, asgi_server, member)
    page.goto(f"{asgi_server}/projects/{project.slug}/compare/")
    hint = page.locator("#compare-empty")
    assert hint.is_visible() and "No runs picked yet." in hint.inner_text()
    assert page.locator("#compare-chart").count() == 0
    assert page.evaluate("document.documentElement.scrollWidth") <= SIZES["phone"]["width"]
    screenshot(page, "compare-empty-phone")
    page.set_viewport_size(SIZES["desktop"])
    screenshot(page, "compare-empty-desktop")
    page.click("#compare-empty-runs")
    page.wait_for_url("**/runs/")
    for job in runs:
        page.get_by_label(f"Select {job.name}").check()
    page.click("#compare-selected")
    page.wait_for_url("**/compare/?runs=**")
    wait_for(lambda: _traces(page) == 2, 60, "the two ticked runs' curves")
    assert page.locator("#compare-empty").count() == 0


def test_groups_keep_their_band_with_log_scale(
    asgi_server, project, owner, member, cluster, page
) -> None:
    runs = _stage(project, owner, cluster)[:3]
    page.set_viewport_size(SIZES["desktop"])
    browser_log_in(page, asgi_server, member)
    ids = ",".join(str(job.pk) for job in runs)
    page.goto(f"{asgi_server}/projects/{project.slug}/compare/?runs={ids}&group=lr&log=1")
    # Two groups (lr 0.1 and 0.01): each a band (two edge traces) and a mean line.
    wait_for(lambda: page.locator("#compare-chart .legendtext").count() == 2, 60, "2 groups")
    assert _traces(page) == 6
    assert page.locator("#compare-chart .g-ytitle").text_content() == "loss, mean ± 1 std"
    assert page.evaluate(f"{CHART}.layout.yaxis.type") == "log"
    assert not page.locator("#compare-left-out").is_visible()
    screenshot(page, "compare-groups-log")


def test_the_job_page_keeps_its_log_scale_and_smoothing(
    asgi_server, project, owner, member, cluster, page
) -> None:
    job = _run(project, owner, cluster, "single", {"loss": 1.0}, {})
    page.set_viewport_size(SIZES["desktop"])
    browser_log_in(page, asgi_server, member)
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    chart = "document.getElementById('chart-loss')"
    wait_for(lambda: page.evaluate(f"({chart}.data || []).length") == 1, 60, "the loss chart")
    assert page.evaluate(f"Math.max(...{chart}.data[0].y)") == 9.0
    page.check("#loss-log")
    wait_for(lambda: page.evaluate(f"{chart}.layout.yaxis.type") == "log", 30, "a log y axis")
    _smooth(page, "#loss-smooth", "0.9")
    wait_for(lambda: page.evaluate(f"Math.max(...{chart}.data[0].y)") < 3.0, 30, "smoothed loss")
    screenshot(page, "job-page-log-smooth")
