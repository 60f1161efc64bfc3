"""Every figure with its unit and every chart axis named, and the pages on a phone (390x844),
in Chromium against daphne: the runs table's throughput in tokens/s, samples/s and steps/s
as each run logged it; the job page's charts with titled axes; the mode bar clear of each
chart's title on a phone; no main page scrolling sideways on a phone; a log line wrapped at
its spaces, never inside a number. No cluster: rows are staged with factories."""

from datetime import UTC, datetime, timedelta

import pytest

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt
from monitoring.models import AlertRule
from monitoring.models.alerts import AlertKind
from monitoring.runs.summary import runs_record
from monitoring.series.write import series_append
from portal_lib.units import quantity
from tests import factories
from tests.browser.test_page_facts import _log_in
from tests.browser.test_sweep_page import _stage as _stage_sweep
from tests.helpers import SCREENSHOTS, screenshot, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 800}
# The three runs: one logs tokens/s, one samples/s, one it/s (steps).
RATES = (
    ("tokens_per_sec", 1.28e5, "128k tokens/s"),
    ("samples_per_sec", 4982.0, "4.98k samples/s"),
    ("it_per_s", 3.3, "3.3 steps/s"),
)
LONG_NUMBER = "1234567890123456789012345678901234567890"
LONG_TOKEN = "x" * 400  # no space anywhere: it must still wrap inside the page
LOG = (
    "step 1, loss=0.9000 tokens_per_sec=128000.0 mfu=0.4123 lr=0.00030000 grad_norm=1.234567\n"
    f"checkpoint hash {LONG_NUMBER} saved to /scratch/run/ckpt-000001 after a long pause\n"
    f"{LONG_TOKEN}\n"
)


def _unreachable_cluster() -> Cluster:
    """A cluster whose status read fails at once (nothing listens): the pages still show."""
    cluster = factories.cluster("bern")
    Cluster.objects.filter(pk=cluster.pk).update(ssh_host="127.0.0.1", ssh_port=1)
    factories.account(cluster, None)
    return cluster


def _runs(project, owner, cluster) -> list[int]:
    ids = []
    for number, (name, value, _) in enumerate(RATES):
        job, attempt = factories.job(project, owner, cluster, name=f"rate-{number}")
        points = [(attempt.pk, "loss", float(s), 2.0 / s) for s in range(1, 30)]
        points += [(attempt.pk, name, float(s), value) for s in range(1, 30)]
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})
        ids.append(job.pk)
    return ids


def _job(project, owner, cluster):
    job, attempt = factories.job(project, owner, cluster, state=State.RUNNING, total_steps=200)
    start = datetime.now(UTC) - timedelta(minutes=5)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, started_at=start, node_list="n1"
    )
    steps = range(1, 41)
    t0 = start.timestamp()
    points = [(attempt.pk, "loss", float(s), 3.0 / s) for s in steps]
    points += [(attempt.pk, "tokens_per_sec", float(s), 1.28e5 + 10 * s) for s in steps]
    points += [(attempt.pk, "learning_rate", float(s), 3e-4) for s in steps]
    for gpu in (0, 1):
        for metric, value in (
            ("utilization", 97.0),
            ("memory_used", 61_000.0),
            ("temperature", 71.0),
            ("power", 612.0),
        ):
            name = f"gpu/n1/{gpu}/{metric}"
            points += [(attempt.pk, name, t0 + 5 * s, value + gpu) for s in steps]
    series_append(points=points)
    store_log(attempt, LOG.encode())
    return job


def _layouts(page) -> list[dict]:
    """Each drawn chart's id, title and axis titles, from Plotly's own (full) layout."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
        .filter((el) => !el.hidden && el._fullLayout)
        .map((el) => {
          const l = el._fullLayout; const axes = {};
          for (const key of Object.keys(l)) {
            if (/^[xy]axis\\d*$/.test(key) && l[key].visible !== false) {
              axes[key] = (l[key].title || {}).text || '';
            }
          }
          return {id: el.id, title: (l.title || {}).text || '', axes};
        })"""
    )


def _boxes(page, chart_id: str) -> dict:
    """The mode bar's and the title's boxes on the page, after a hover has shown the bar."""
    page.locator(f"#{chart_id}").hover()  # over the plot: the bar shows (a tap on a phone)
    page.wait_for_timeout(200)
    return page.evaluate(
        """(id) => {
        const el = document.getElementById(id);
        const box = (s) => { const e = el.querySelector(s); if (!e) return null;
          const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, width: r.width, height: r.height}; };
        return {bar: box('.modebar'), title: box('.gtitle')};
        }""",
        chart_id,
    )


def _overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


def _lines_of(page, text: str) -> int:
    """How many lines of the log the first occurrence of `text` spans (1: not broken)."""
    return page.evaluate(
        """(text) => {
        const log = document.getElementById('log');
        const walker = document.createTreeWalker(log, NodeFilter.SHOW_TEXT);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const at = node.textContent.indexOf(text);
          if (at < 0) continue;
          const range = document.createRange();
          range.setStart(node, at); range.setEnd(node, at + text.length);
          return new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top))).size;
        }
        return 0;
        }""",
        text,
    )


def _stage(project, owner, staff):
    cluster = _unreachable_cluster()
    _runs(project, owner, cluster)
    job = _job(project, owner, cluster)
    sweep = _stage_sweep(project, owner)
    AlertRule.objects.create(owner=staff, kind=AlertKind.LOSS_NONFINITE)
    return cluster, job, sweep


def _wait_charts(page, ids: list[str]) -> None:
    wait_for(
        lambda: {c["id"] for c in _layouts(page)} >= set(ids),
        30,
        f"charts {ids}: {_layouts(page)}",
    )


JOB_CHARTS = [
    "chart-loss",
    "chart-rate",
    "chart-learning_rate",
    "chart-utilization",
    "chart-memory_used",
    "chart-temperature",
    "chart-power",
]


def test_every_figure_has_its_unit_and_every_chart_axis_a_title(
    asgi_server, project, owner, staff, page
) -> None:
    cluster, job, sweep = _stage(project, owner, staff)
    _log_in(page, asgi_server, staff, f"/projects/{project.slug}/runs/?f=name~rate-")
    # The runs table: each run's throughput in the unit it logged, the same text as Python's.
    cells = page.locator("#runs-table tbody td:nth-child(9)").all_inner_texts()
    header = page.locator("#runs-table thead th").nth(8).inner_text()
    assert header.startswith("Throughput"), header
    assert sorted(cells) == sorted(text for *_, text in RATES), cells
    assert "MFU (%)" in page.locator("#runs-table thead").inner_text()
    screenshot(page, "units-desktop-runs")
    # The script's rule is Python's: the same text for the same values.
    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    _wait_charts(page, JOB_CHARTS)
    values = [(1.28e5, "tokens/s"), (4982.0, "samples/s"), (3.3, "steps/s"), (2.5e-5, ""),
              (1.28e17, ""), (999.96, "W"), (59.57, "GiB"), (-4200.0, "")]  # fmt: skip
    in_js = page.evaluate("(vs) => vs.map(([v, u]) => Units.quantity(v, u))", values)
    assert in_js == [quantity(v, u) for v, u in values]
    charts = {c["id"]: c for c in _layouts(page)}
    for chart in charts.values():
        assert chart["title"], chart
        assert all(chart["axes"].values()), chart  # every axis named
    assert charts["chart-loss"]["axes"] == {"xaxis": "step", "yaxis": "loss"}
    assert charts["chart-rate"]["axes"]["yaxis"] == "tokens/s"
    units = {c: charts[c]["axes"]["yaxis"] for c in JOB_CHARTS[3:]}
    assert units == {
        "chart-utilization": "%",
        "chart-memory_used": "GiB",
        "chart-temperature": "°C",
        "chart-power": "W",
    }
    assert all(charts[c]["axes"]["xaxis"] == "time" for c in JOB_CHARTS[3:])
    memory = page.evaluate("Math.max(...document.getElementById('chart-memory_used').data[0].y)")
    assert memory == pytest.approx(61_000 / 1024)  # MiB from nvidia-smi, drawn in GiB
    assert page.locator("#num-throughput").inner_text() == "128k tokens/s"
    screenshot(page, "units-desktop-job")
    # The project's burn-down, the cluster's waits, the sweep's parallel coordinates.
    page.goto(f"{asgi_server}/projects/{project.slug}/")
    _wait_charts(page, ["chart-usage"])
    usage = {c["id"]: c for c in _layouts(page)}["chart-usage"]
    assert usage["axes"] == {"xaxis": "day", "yaxis": "GPU-hours"}
    screenshot(page, "units-desktop-project")
    page.goto(f"{asgi_server}/sweeps/{sweep.pk}/")
    page.locator("#sweep-parcoords[data-ready]").wait_for()
    ticks = page.locator("#sweep-parcoords .tick text").all_text_contents()
    assert ticks and not any("<sup>" in t or "\N{MULTIPLICATION SIGN}" in t for t in ticks), ticks
    colour = page.evaluate(
        "document.getElementById('sweep-parcoords')._fullData[0].line.colorbar.title.text"
    )
    assert colour == sweep.metric
    screenshot(page, "units-desktop-sweep")
    page.goto(f"{asgi_server}/clusters/{cluster.name}/")
    headers = page.locator("table thead").all_inner_texts()
    assert any("Memory free (MB)" in h for h in headers), headers
    screenshot(page, "units-desktop-cluster")


MAIN_PAGES = [
    "/",
    "/jobs/",
    "/jobs/new/",
    "/jobs/{job}/",
    "/alerts/",
    "/alerts/rules/",
    "/clusters/",
    "/clusters/{cluster}/",
    "/clusters/{cluster}/nodes/",
    "/projects/{project}/",
    "/projects/{project}/runs/",
    "/projects/{project}/sweeps/",
    "/projects/{project}/sweeps/new/",
    "/sweeps/{sweep}/",
    "/overview/",
    "/account/tokens/",
    "/account/cluster-logins/",
]


def test_a_phone_sees_chart_titles_whole_no_page_scrolls_sideways_and_logs_wrap_at_spaces(
    asgi_server, project, owner, staff, browser
) -> None:
    cluster, job, sweep = _stage(project, owner, staff)
    context = browser.new_context(viewport=PHONE, has_touch=True, is_mobile=True)
    page = context.new_page()
    page.set_default_timeout(30_000)
    try:
        _log_in(page, asgi_server, staff, f"/jobs/{job.pk}/")
        _wait_charts(page, JOB_CHARTS)
        for chart in JOB_CHARTS:
            boxes = _boxes(page, chart)
            assert boxes["bar"] and boxes["title"], (chart, boxes)
            assert not _overlaps(boxes["bar"], boxes["title"]), (chart, boxes)
        page.locator("#chart-rate").screenshot(path=str(SCREENSHOTS / "units-phone-chart-rate.png"))
        # The log: a number is never split across lines; a token with no space still fits.
        page.locator("#log").wait_for()
        wait_for(lambda: LONG_NUMBER[:20] in page.locator("#log").inner_text(), 30, "the log")
        for text in ("tokens_per_sec=128000.0", "lr=0.00030000", LONG_NUMBER[:12]):
            assert _lines_of(page, text) == 1, text
        assert _lines_of(page, LONG_TOKEN) > 1  # wrapped inside the box, not past the page
        fits = page.evaluate(
            "(() => { const l = document.getElementById('log'); return l.scrollWidth <= l.clientWidth; })()"
        )
        assert fits
        page.locator("#log").screenshot(path=str(SCREENSHOTS / "units-phone-log.png"))
        # The sweep's chart: its title below the mode bar too.
        page.goto(f"{asgi_server}/sweeps/{sweep.pk}/")
        page.locator("#sweep-parcoords[data-ready]").wait_for()
        boxes = _boxes(page, "sweep-parcoords")
        assert boxes["title"] and not (boxes["bar"] and _overlaps(boxes["bar"], boxes["title"]))
        # The alert rules' Delete button is on the screen.
        page.goto(f"{asgi_server}/alerts/rules/")
        delete = page.get_by_role("button", name="Delete").first.bounding_box()
        assert delete and delete["x"] >= 0 and delete["x"] + delete["width"] <= PHONE["width"]
        wide = {}
        values = {
            "job": job.pk,
            "cluster": cluster.name,
            "project": project.slug,
            "sweep": sweep.pk,
        }
        for template in MAIN_PAGES:
            path = template.format(**values)
            page.goto(f"{asgi_server}{path}")
            page.wait_for_load_state("load")
            page.wait_for_timeout(400)  # the pages' scripts fill tables and draw charts
            wide[path] = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            screenshot(page, "units-phone-" + (path.strip("/").replace("/", "-") or "dashboard"))
        assert not any(wide.values()), wide
    finally:
        context.close()
