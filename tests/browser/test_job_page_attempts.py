"""The job page in Chromium against daphne, fed as the poll feeds it (stored rows, then a
delta to the job's group): it follows a restart without a reload, draws one curve
across attempts, keeps each attempt's log in its own tab, opens a failed job with its
diagnosis above the fold, and fits a phone. No cluster: the attempts are staged, so
every step of a restart happens exactly when the test says."""

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.rundir import job_group
from monitoring.diagnosis.diagnose import diagnose
from monitoring.models import LogFile
from monitoring.series.read import series_read
from monitoring.series.write import series_append
from tests import factories
from tests.helpers import PASSWORD, for_docs, screenshot, store_log, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
ODD_NAME = "<b>lr</b>?x=1&y#z"  # markup in a legend, and a query and fragment in a URL


def _log_in(page, server: str, user, job_id: int) -> None:
    page.goto(f"{server}/login/?next=/jobs/{job_id}/")
    page.get_by_label("User name").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.locator("#job-state").wait_for()


def _push(job_id: int, **delta: object) -> None:
    """What the poll sends after it stored the rows (monitoring.ingest.watch)."""
    send = async_to_sync(get_channel_layer().group_send)
    message = {"type": "job.delta", "job": job_id, **delta}
    # Playwright's loop runs in this thread, and async_to_sync needs one without.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(send, job_group(job_id), message).result(timeout=30)


def _trace(page, chart: str, name: str) -> dict:
    return page.evaluate(
        """([chart, name]) => {
        const el = document.getElementById(chart);
        const t = el && el.data ? el.data.find((d) => d.name === name) : null;
        return t ? {x: Array.from(t.x), n: t.x.length} : {x: [], n: 0};
    }""",
        [chart, name],
    )


def _charts(page) -> str:
    """Each chart's traces and point counts, for a failure message."""
    return str(
        page.evaluate(
            """() => Array.from(document.querySelectorAll('.chart')).map((el) =>
            [el.id, el.hidden, (el.data || []).map((t) => [t.name, t.x.length])])"""
        )
    )


def _store(attempt: Attempt, steps: range, *, base: float) -> bytes:
    series_append(
        points=[(attempt.pk, "loss", float(s), base / s) for s in steps]
        + [(attempt.pk, "tokens_per_sec", float(s), 5800.0 + s) for s in steps]
        + [(attempt.pk, "samples", float(s), 32.0 * s) for s in steps]
        + [(attempt.pk, "it_per_s", float(s), 2.5) for s in steps]
        + [(attempt.pk, "steps_per_sec/n1", float(s), 5.7) for s in steps]
        + [(attempt.pk, "steps_per_sec/n2", float(s), 1.7) for s in steps]
        + [(attempt.pk, ODD_NAME, float(s), 3e-4) for s in steps]
    )
    log = "".join(f"attempt {attempt.number} step {s}, loss={base / s:.4f}\n" for s in steps)
    store_log(attempt, log.encode())
    return log.encode()


def _event(attempt: Attempt, before: str, after: str, reason: str = "") -> None:
    JobEvent.objects.create(
        job=attempt.job,
        attempt=attempt,
        time=datetime.now(UTC),
        from_state=before,
        to_state=after,
        reason=reason,
    )


def _fail(attempt: Attempt, log: str) -> None:
    found = diagnose(state=State.FAILED, exit_code=1, log_tail=log)
    assert found is not None
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.FAILED,
        exit_code=1,
        files_complete=True,
        ended_at=datetime.now(UTC),
        failure_class=found.failure_class,
        diagnosis=found.as_json(),
    )


def test_a_page_follows_a_restart_and_a_failure_first(
    asgi_server, project, member, browser, page
) -> None:
    job, first = factories.job(
        project, member, factories.cluster(), max_restarts=1, nodes=2, total_steps=40
    )
    Attempt.objects.filter(pk=first.pk).update(
        state=State.RUNNING, started_at=datetime.now(UTC), node_list="n[1-2]"
    )
    _event(first, State.PENDING, State.RUNNING)
    _store(first, range(1, 13), base=4.0)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    _log_in(page, asgi_server, member, job.pk)

    # Attempt 1: every stored point drawn; rates, totals and per-node pace apart.
    wait_for(lambda: _trace(page, "chart-loss", "loss")["n"] == 12, 30, "attempt 1's loss")
    wait_for(lambda: _trace(page, "chart-rate", "tokens_per_sec")["n"] == 12, 10, _charts(page))
    # Tokens/s and steps/s on one chart, each on its own axis.
    wait_for(lambda: _trace(page, "chart-rate", "it_per_s")["n"] == 12, 10, _charts(page))
    assert not errors, errors
    assert _trace(page, "chart-rate", "samples")["n"] == 0  # a running total: not on the rates
    assert _trace(page, "chart-total", "samples")["n"] == 12
    wait_for(lambda: _trace(page, "chart-pace", "steps_per_sec/n2")["n"] == 12, 10, "pace")
    # A name is text: escaped for Plotly, so the legend shows it as written.
    legend = page.locator("#chart-other .legendtext").first.text_content()
    assert legend == ODD_NAME
    assert "step 12 of 40" in page.locator("#progress-text").inner_text()
    assert "model size" in page.locator("#mfu-note").inner_text()
    wait_for(lambda: "attempt 1 step 12" in page.locator("#log").inner_text(), 10, "log 1")

    # The rank dies; the poll stores attempt 2 (resumed from step 8) and pushes its delta.
    _fail(first, "attempt 1 step 12\nRuntimeError: NCCL error: unhandled system error\n")
    _event(first, State.RUNNING, State.FAILED, "A process failed in NCCL")
    _push(job.pk, attempt=1, state=State.FAILED)
    second = Attempt.objects.create(
        job=job, number=2, state=State.RUNNING, started_at=datetime.now(UTC), node_list="n[1-2]"
    )
    _event(second, "", State.QUEUED, "Restart 1/1 after a failure on attempt 1, from step 8")
    _event(second, State.PENDING, State.RUNNING)
    log2 = _store(second, range(9, 16), base=3.0)
    _push(
        job.pk,
        attempt=2,
        state=State.RUNNING,
        log={"file": "stdout.log", "offset": 0, "end": len(log2), "text": log2.decode()},
        series={"loss": [[float(s), 3.0 / s] for s in range(9, 16)]},
    )

    # Followed without a reload: one curve, no step twice, a marker where attempt 2 began.
    wait_for(lambda: page.evaluate("window.jobPage.current()") == 2, 20, "the page on attempt 2")
    wait_for(lambda: _trace(page, "chart-loss", "loss")["n"] == 15, 20, "one joined curve")
    steps = _trace(page, "chart-loss", "loss")["x"]
    assert steps == [float(s) for s in range(1, 16)]
    markers = page.evaluate(
        "() => document.getElementById('chart-loss').layout.shapes.map((s) => s.x0)"
    )
    assert markers == [9.0]
    assert page.locator("#chart-loss .annotation-text").first.text_content() == "attempt 2"
    wait_for(lambda: "attempt 2 step 15" in page.locator("#log").inner_text(), 20, "log 2")
    assert "attempt 1 step" not in page.locator("#log").inner_text()  # never mixed
    assert page.locator("#log-tab-2").get_attribute("aria-selected") == "true"
    downloads = page.locator("#log-tabs a.download")
    assert [downloads.nth(i).get_attribute("href") for i in range(downloads.count())] == [
        f"/api/v1/jobs/{job.pk}/attempts/{n}/log/download" for n in (1, 2)
    ]
    page.locator("#log-tab-1").click()
    wait_for(lambda: "attempt 1 step 12" in page.locator("#log").inner_text(), 10, "tab 1")
    assert "attempt 2 step" not in page.locator("#log").inner_text()
    wait_for(
        lambda: (
            "attempt 2: · → QUEUED — Restart 1/1 after a failure on attempt 1"
            in page.locator("#timeline").inner_text()
        ),
        20,
        "the timeline naming attempt 2 and why it started",
    )
    assert (
        "attempt 1: RUNNING → FAILED — A process failed" in page.locator("#timeline").inner_text()
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    # docs/job-page-restart.png is the sandbox's real restart (tests/e2e/test_job_page_restart.py).
    screenshot(page, "job-page-restart-staged")

    # A page opened now draws every point the API returns, across both attempts.
    fresh = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    _log_in(fresh, asgi_server, member, job.pk)
    below = [x for x in series_read(attempt_id=first.pk, name="loss").xs if x < 9]
    expected = len(below) + series_read(attempt_id=second.pk, name="loss").total
    wait_for(lambda: _trace(fresh, "chart-loss", "loss")["n"] == expected, 30, "a fresh page")
    for name, chart in (("tokens_per_sec", "chart-rate"), ("samples", "chart-total")):
        wait_for(lambda c=chart, n=name: _trace(fresh, c, n)["n"] == expected, 10, _charts(fresh))

    # Phone width: nothing wider than the screen.
    fresh.set_viewport_size({"width": 390, "height": 844})
    fresh.wait_for_timeout(500)
    assert fresh.evaluate("document.documentElement.scrollWidth") <= 390
    shot = screenshot(fresh, "job-page-phone")
    for_docs(shot, "job-page-phone.png")
    fresh.context.close()

    # Attempt 2 fails too, with no restart left: the page opens with why, above the fold.
    _fail(second, "attempt 2 step 15\nModuleNotFoundError: No module named 'flash_attn'\n")
    _event(second, State.RUNNING, State.FAILED, "Missing Python module")
    type(job).objects.filter(pk=job.pk).update(state=State.FAILED)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{asgi_server}/jobs/{job.pk}/")  # opened afresh, not a reload's old scroll
    banner = page.locator("#failure-banner")
    box = banner.bounding_box()
    assert box is not None and box["y"] < 250
    assert "No module named" in banner.inner_text()
    fixes = page.locator("#failure-banner .fixes").bounding_box()
    assert fixes is not None and fixes["y"] + fixes["height"] <= 900
    page.wait_for_timeout(500)
    fold = screenshot(page, "job-page-failed-fold", full_page=False)  # the fold: 1440x900
    for_docs(fold, "job-page-failed.png")
    # Wider than the screen at no width: the laptop's page is as wide as its window.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1440


def test_the_progress_bar_appears_when_the_log_says_the_total(
    asgi_server, project, member, page
) -> None:
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING, started_at=datetime.now(UTC))
    _store(attempt, range(1, 6), base=2.0)
    _log_in(page, asgi_server, member, job.pk)
    wait_for(lambda: _trace(page, "chart-loss", "loss")["n"] == 5, 30, "the loss curve")
    assert page.locator("#progress").is_hidden()  # no total known: no bar
    # A tqdm bar's `5/50` is read: the reader keeps the total; the next delta has no new point.
    LogFile.objects.filter(attempt=attempt, name="stdout.log").update(
        reader_state={"step": 5, "total_steps": 50}
    )
    store_log(attempt, b"\rtrain:  10%|#         | 5/50")
    _push(job.pk, attempt=1, state=State.RUNNING, log={"file": "stdout.log", "offset": 0, "end": 1})
    wait_for(
        lambda: (
            "step 5 of 50" in page.locator("#progress-text").inner_text()
            and "ETA" in page.locator("#progress-text").inner_text()
        ),
        20,
        "the progress bar from the log's total",
    )


def test_a_state_that_changed_before_the_socket_joined_reaches_the_badge(
    asgi_server, project, member, page
) -> None:
    # The page is rendered while the job is pending and the job starts before the socket's
    # hello: later deltas repeat RUNNING, so the hello itself must move the badge.
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.PENDING)
    Job.objects.filter(pk=job.pk).update(state=State.PENDING)

    def starts_before_the_hello(ws) -> None:
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.RUNNING, started_at=datetime.now(UTC)
        )
        Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
        _event(attempt, State.PENDING, State.RUNNING)
        ws.connect_to_server()

    page.route_web_socket(f"**/ws/jobs/{job.pk}/", starts_before_the_hello)
    _log_in(page, asgi_server, member, job.pk)
    wait_for(
        lambda: page.locator("#job-state").get_attribute("data-state") == State.RUNNING,
        30,
        "the hello's state on the badge",
    )
    assert page.locator("#job-state").inner_text() == State.RUNNING
