"""The job page in Chromium, live: the DDP example's log, loss curve and GPU charts grow."""

import shutil
from pathlib import Path

import pytest

from jobs.models import Attempt, State
from tests.helpers import PASSWORD, screenshot, submit_ddp_example, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


def _points(browser_page, chart: str) -> int:
    return browser_page.evaluate(
        f"""() => {{
        const el = document.getElementById({chart!r});
        return el && el.data ? el.data.reduce((n, t) => n + t.x.length, 0) : 0;
    }}"""
    )


def test_ddp_job_page_grows_live(
    asgi_server,
    celery_worker,
    researcher,
    project,
    sandbox_cluster,
    alice,
    page,
) -> None:
    job = submit_ddp_example(
        alice,
        researcher,
        project,
        sandbox_cluster,
        name="ddp live",
        args="--steps 400 --sleep 0.1 --log-every 2",
    )
    researcher.set_password(PASSWORD)
    researcher.save()
    page.goto(f"{asgi_server}/login/?next=/jobs/{job.pk}/")
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="ddp live").wait_for()

    wait_for(lambda: "step" in page.locator("#log").inner_text(), 120, "log lines on the page")
    wait_for(lambda: _points(page, "chart-loss") >= 3, 60, "the loss curve")
    wait_for(lambda: _points(page, "chart-utilization") >= 2, 60, "GPU utilisation")
    first = (
        len(page.locator("#log").inner_text()),
        _points(page, "chart-loss"),
        _points(page, "chart-utilization"),
    )
    screenshot(page, "job-page-early")
    wait_for(
        lambda: (
            len(page.locator("#log").inner_text()) > first[0]
            and _points(page, "chart-loss") > first[1]
            and _points(page, "chart-utilization") > first[2]
        ),
        60,
        "log, loss curve and GPU chart to grow without a reload",
    )
    assert page.locator("#job-state").inner_text() in ("RUNNING", "Running")
    shot = screenshot(page, "job-page")
    (ROOT / "docs").mkdir(exist_ok=True)
    shutil.copy(shot, ROOT / "docs" / "job-page.png")
    alice.run(f"scancel {Attempt.objects.get(job=job).slurm_job_id}")
    wait_for(lambda: Attempt.objects.get(job=job).state == State.CANCELLED, 30, "the job to stop")
