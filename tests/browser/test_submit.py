"""The researcher's dashboard in Chromium against daphne, a Celery worker and the sandbox
Slurm cluster: log in, submit through the form (command job to completion; 2-node DDP from
its template, then cancel it), inline errors, clone, and every page's screenshot."""

import re
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from clusters.sandbox.config import GPUS_PER_NODE, NODES
from jobs.enums import State
from jobs.models import Job
from projects.models import Project
from tests.helpers import browser_log_in, for_docs, screenshot, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]


def _fill_form(page, **fields: str) -> None:
    for name, value in fields.items():
        element = page.locator(f"#id_{name}")
        if element.evaluate("e => e.tagName") == "SELECT":
            element.select_option(value)
        else:
            element.fill(value)


def _preview_ready(page) -> None:
    page.wait_for_function(
        "() => document.getElementById('preview-status').textContent === 'ready'"
    )


def test_command_job_through_the_form_errors_clone_and_pages(
    asgi_server,
    celery_worker,
    researcher: User,
    project: Project,
    sandbox_cluster: Cluster,
    page,
) -> None:
    browser_log_in(page, asgi_server, researcher)
    page.get_by_role("link", name="New job").first.click()
    page.get_by_role("heading", name="New job").wait_for()
    page.locator("#id_partition option", has_text="gpu").first.wait_for(state="attached")

    # Inline errors, live from the preview, each naming what to change.
    _fill_form(page, time_limit="ninety minutes")
    errors = page.locator("#err-time_limit")
    errors.get_by_text("write it as minutes (90)").wait_for()
    _fill_form(page, time_limit="0:05:00", gpus_per_node="3")
    page.locator("#err-gpus_per_node").get_by_text("ask for at most 2 per node").wait_for()
    assert errors.inner_text() == ""
    screenshot(page, "submit-errors")
    # The server says the same when the form is sent anyway, and creates nothing.
    page.get_by_role("button", name="Submit job").click()
    page.locator("#err-gpus_per_node").get_by_text("have 2 GPUs").wait_for()
    assert not Job.objects.exists()

    _fill_form(
        page,
        name="hello-form",
        gpus_per_node="1",
        time_limit="0:05:00",
        setup="export GREETING=hello",
        command='echo "$GREETING from the form"\nsleep 2',
        model_params="125M",
    )
    page.locator("#script").get_by_text("from the form").wait_for()
    _preview_ready(page)
    assert page.locator("#est-gpu-hours").inner_text() == "0.08"
    assert "2.50 per GPU-h" in page.locator("#est-cost").inner_text()
    assert page.locator("#est-left-before").inner_text() == "100.00 GPU-h"
    # One node's CPUs for five minutes; the project has no CPU-hour budget.
    assert re.fullmatch(r"0\.\d\d \(\d+ CPUs?\)", page.locator("#est-cpu-hours").inner_text())
    assert page.locator("#est-cpu-left").inner_text() == "16,000.00 CPU-h"  # the default budget
    for_docs(screenshot(page, "submit-form"), "submit-form.png")
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="hello-form").wait_for()
    job = Job.objects.get(name="hello-form")
    assert (job.user, job.model_params, job.setup) == (
        researcher,
        125_000_000,
        "export GREETING=hello",
    )
    # The badge follows the job live, without a reload. On a busy cluster the job may
    # wait its turn in Slurm: first the job, with a generous deadline, then the page.
    wait_for(lambda: Job.objects.get(pk=job.pk).state == State.COMPLETED, 240, "the job to end")
    page.wait_for_function(
        "() => document.getElementById('job-state').textContent.trim().toUpperCase()"
        " === 'COMPLETED'",
        timeout=30_000,
    )
    wait_for(lambda: "from the form" in page.locator("#log").inner_text(), 30, "the job's log")
    # A finished job offers no cancel, live and after a reload.
    page.locator("#job-cancel").wait_for(state="detached")
    page.reload()
    page.get_by_role("link", name="Clone").wait_for()
    assert page.locator("#job-cancel").count() == 0
    screenshot(page, "job-page-completed")

    # Clone opens the form with the job's values.
    page.get_by_role("link", name="Clone").click()
    page.get_by_role("heading", name="New job").wait_for()
    assert page.locator("#id_name").input_value() == "hello-form copy"
    assert page.locator("#id_command").input_value() == 'echo "$GREETING from the form"\nsleep 2'
    assert page.locator("#id_time_limit").input_value() == "0:05:00"
    assert page.locator("#id_setup").input_value() == "export GREETING=hello"
    page.locator("#script").get_by_text("from the form").wait_for()
    screenshot(page, "clone")

    page.get_by_role("link", name="Jobs", exact=True).click()
    row = page.get_by_role("row").filter(has_text="hello-form")
    assert row.get_by_text("Completed").is_visible()
    for_docs(screenshot(page, "job-list"), "job-list.png")

    page.goto(f"{asgi_server}/")
    page.get_by_role("heading", name="Recently finished").wait_for()
    page.get_by_role("cell", name=re.compile("hello-form")).first.wait_for()
    gpus = len(NODES) * GPUS_PER_NODE
    page.wait_for_function(
        f"() => /\\d+ \\/ {gpus}/.test(document.querySelector('[data-field=gpus_free]').textContent)"
    )
    for_docs(screenshot(page, "dashboard"), "dashboard.png")

    page.get_by_role("link", name=sandbox_cluster.name).click()
    page.get_by_role("cell", name="n1", exact=True).wait_for()
    assert page.locator("#gpus-total").inner_text() == str(gpus)
    for_docs(screenshot(page, "cluster"), "cluster.png")

    page.goto(f"{asgi_server}/projects/{project.slug}/")
    page.get_by_role("heading", name="Members").wait_for()
    page.locator("#chart-usage .main-svg").first.wait_for()
    for_docs(screenshot(page, "project"), "project.png")

    # On a phone the pages fit the screen: wide tables scroll inside their card.
    page.set_viewport_size({"width": 390, "height": 844})
    for path, name in (("/jobs/", "job-list-phone"), ("/jobs/new/", "submit-form-phone")):
        page.goto(f"{asgi_server}{path}")
        page.get_by_role("link", name="New job").first.wait_for()
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390
        screenshot(page, name)


def test_ddp_job_from_its_template_runs_and_is_cancelled(
    asgi_server,
    celery_worker,
    researcher: User,
    project: Project,
    sandbox_cluster: Cluster,
    example_trainer: str,
    page,
) -> None:
    browser_log_in(page, asgi_server, researcher)
    page.goto(f"{asgi_server}/jobs/new/")
    page.locator("#id_partition option", has_text="gpu").first.wait_for(state="attached")
    _fill_form(
        page,
        name="ddp-form",
        template="torchrun",
        nodes="2",
        gpus_per_node="1",
        time_limit="0:10:00",
        command=f"{example_trainer} --steps 3000 --sleep 0.1 --log-every 5",
        model_params="1M",
    )
    script = page.locator("#script")
    script.get_by_text("torchrun").wait_for()
    assert "#SBATCH --nodes=2" in script.inner_text()
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("heading", name="ddp-form").wait_for()
    job = Job.objects.get(name="ddp-form")

    # The dashboard, opened while the job starts, follows its state without a reload.
    page.goto(f"{asgi_server}/")
    page.locator(f'[data-job-state="{job.pk}"]').first.wait_for()
    # Two nodes may take a while on a busy cluster: the job first, then the page.
    wait_for(lambda: Job.objects.get(pk=job.pk).state == State.RUNNING, 240, "the job to run")
    page.wait_for_function(
        "id => document.querySelector(`[data-job-state='${id}']`).textContent === 'Running'",
        arg=job.pk,
        timeout=30_000,
    )
    screenshot(page, "dashboard-running")

    page.goto(f"{asgi_server}/jobs/{job.pk}/")
    page.wait_for_function(
        "() => document.getElementById('job-state').textContent.trim().toUpperCase() === 'RUNNING'",
        timeout=60_000,
    )
    wait_for(lambda: "step" in page.locator("#log").inner_text(), 90, "training steps in the log")
    assert (job.template, job.nodes) == ("torchrun", 2)
    screenshot(page, "job-page-ddp-running")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_text(f"Cancelling job #{job.pk}.").wait_for()
    wait_for(
        lambda: Job.objects.get(pk=job.pk).state == State.CANCELLED, 60, "the job to be cancelled"
    )
    page.wait_for_function(
        "() => document.getElementById('job-state').textContent.trim().toUpperCase()"
        " === 'CANCELLED'",
        timeout=30_000,
    )
    screenshot(page, "job-page-cancelled")
