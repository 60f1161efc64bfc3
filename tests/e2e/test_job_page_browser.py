"""The job page in Chromium, live: the DDP example's log, loss curve and GPU charts grow."""

import shutil
from pathlib import Path

import pytest

from jobs.models import Attempt, State, Template
from jobs.services import job_submit
from tests.browser.conftest import browser, page, screenshot  # noqa: F401
from tests.conftest import PASSWORD
from tests.e2e.conftest import wait_for
from tests.jobs.factories import spec

pytestmark = [pytest.mark.sandbox, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ddp_train.py"


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
    page,  # noqa: F811
) -> None:
    if alice.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch")
    researcher.set_password(PASSWORD)
    researcher.save()
    alice.run("mkdir -p -m 700 portal-examples")
    alice.upload("portal-examples/ddp_train.py", EXAMPLE.read_bytes(), mode=0o600)
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="ddp live",
            template=Template.TORCHRUN,
            command="portal-examples/ddp_train.py --steps 400 --sleep 0.1 --log-every 2",
            nodes=2,
            gpus_per_node=1,
        ),
    )
    page.goto(f"{asgi_server}/login/?next=/jobs/{job.pk}/")
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="ddp live").wait_for()

    wait_for(lambda: "step" in page.locator("#log").inner_text(), 120, "log lines on the page")
    wait_for(lambda: _points(page, "chart-metrics") >= 3, 60, "the loss curve")
    wait_for(lambda: _points(page, "chart-utilization") >= 2, 60, "GPU utilisation")
    first = (
        len(page.locator("#log").inner_text()),
        _points(page, "chart-metrics"),
        _points(page, "chart-utilization"),
    )
    screenshot(page, "job-page-early")
    wait_for(
        lambda: (
            len(page.locator("#log").inner_text()) > first[0]
            and _points(page, "chart-metrics") > first[1]
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
