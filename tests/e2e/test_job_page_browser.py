"""The DDP example as a real 2-node job through the torchrun template, watched in Chromium.

While it runs, its page's log, loss curve and GPU charts grow without a reload; when it
ends, it trained on both nodes, its loss came from metrics.jsonl and its checkpoint is
there. One job for both: a 2-node torch job is the suite's costliest thing to start.
"""

import re
import shlex
from pathlib import Path

import pytest

from clusters.sandbox.config import NODES
from clusters.slurm.hostlist import expand_nodes
from jobs.enums import State
from jobs.models import Attempt
from monitoring.series.read import series_names, series_read
from tests.helpers import PASSWORD, QUEUE_WAIT, for_docs, screenshot, submit_ddp_example, wait_for

# The 2-node example to its end in a browser: 147-221 s under load, then the teardown.
pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
STEPS = 150  # enough to watch it grow; it must also end (the two-node checks), so not more


def _points(browser_page, chart: str) -> int:
    return browser_page.evaluate(
        f"""() => {{
        const el = document.getElementById({chart!r});
        return el && el.data ? el.data.reduce((n, t) => n + t.x.length, 0) : 0;
    }}"""
    )


def test_ddp_job_trains_on_two_nodes_and_its_page_grows_live(
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
        args=f"--steps {STEPS} --sleep 0.1 --log-every 2 --checkpoint-every 100",
    )
    researcher.set_password(PASSWORD)
    researcher.save()
    page.goto(f"{asgi_server}/login/?next=/jobs/{job.pk}/")
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="ddp live").wait_for()

    # The job may queue behind other tests' jobs for its two nodes.
    wait_for(
        lambda: "step" in page.locator("#log").inner_text(), QUEUE_WAIT, "log lines on the page"
    )
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
    for_docs(shot, "job-page.png")
    wait_for(lambda: Attempt.objects.get(job=job).files_complete, 180, "the DDP job to finish")
    attempt = Attempt.objects.get(job=job)
    log = alice.run(f"cat {shlex.quote(attempt.run_dir + '/stdout.log')}").text
    assert attempt.state == State.COMPLETED, log[-3000:]
    nodes = expand_nodes(attempt.node_list)
    assert len(nodes) == 2 and set(nodes) <= set(NODES), attempt.node_list
    assert "world_size=2" in log
    losses = [float(x) for x in re.findall(r"step \d+, loss=([0-9.]+)", log)]
    assert len(losses) >= 3 and losses[-1] < losses[0]
    # The loss comes from metrics.jsonl alone (stdout repeats it rounded): one value per step.
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert loss.xs == [float(step) for step in range(1, STEPS + 1)]
    names = set(series_names(attempt_id=attempt.pk))
    assert {"loss", "samples"} <= names
    # Each node's GPU, whichever index Slurm gave the job (other jobs may hold GPU 0).
    for node in nodes:
        assert any(re.fullmatch(rf"gpu/{node}/[01]/utilization", name) for name in names), names
    listing = alice.run(f"ls {shlex.quote(attempt.run_dir + '/checkpoints')}").text.split()
    assert f"step-{STEPS}.pt" in listing
