"""Issue 14, acceptance 3: a sandbox job that prints as nanoGPT, torchtitan and a tqdm bar
(`\\r` redraws) shows its loss, throughput and MFU live on the job page, in Chromium, with
a progress bar and an ETA from the total the bar prints (`61/90`). The bar's redraws are
read while it runs, though no poll brings a complete line then, and each step keeps one
value, the newest, in the database and on the page."""

from pathlib import Path

import pytest

from jobs.enums import State, Template
from jobs.models import Attempt
from jobs.services import job_submit
from monitoring.models import LogFile
from monitoring.series.read import series_read
from tests.factories import spec
from tests.helpers import PASSWORD, for_docs, screenshot, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.browser]

ROOT = Path(__file__).resolve().parents[2]
TRAINER = Path(__file__).with_name("trainers") / "frameworks.py"
STEPS, PAUSE = 90, 0.4  # three phases of 30 steps, 12 s each
# The bar starts, and draws its last step, only when the test has seen what comes before.
GATE = "portal-examples/frameworks-gate"


def _trace(page, chart: str, name: str) -> list[float]:
    return page.evaluate(
        """([chart, name]) => {
        const el = document.getElementById(chart);
        const t = el && el.data ? el.data.find((d) => d.name === name) : null;
        return t ? Array.from(t.x) : [];
    }""",
        [chart, name],
    )


def _values(page, chart: str, name: str) -> dict[float, float]:
    pairs = page.evaluate(
        """([chart, name]) => {
        const t = document.getElementById(chart).data.find((d) => d.name === name);
        return Array.from(t.x).map((x, i) => [x, t.y[i]]);
    }""",
        [chart, name],
    )
    return {x: y for x, y in pairs}


def test_framework_output_shows_live_with_progress_and_eta(
    asgi_server, celery_worker, researcher, project, sandbox_cluster, alice, page
) -> None:
    alice.run("mkdir -p -m 700 portal-examples")
    alice.upload("portal-examples/frameworks.py", TRAINER.read_bytes(), mode=0o600)
    alice.run(f"rm -f {GATE}.bar {GATE}.end")
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="framework output",
            template=Template.COMMAND,
            command=f"python3 portal-examples/frameworks.py {STEPS} {PAUSE} {GATE}",
            nodes=1,
            gpus_per_node=1,
            hang_floor_seconds=900,  # the bar waits for the test at its gates, on a busy machine
            # No total in the spec: the progress bar's total is the one the tqdm bar prints.
        ),
    )
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    researcher.set_password(PASSWORD)
    researcher.save()
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{asgi_server}/login/?next=/jobs/{job.pk}/")
    page.get_by_label("User name").fill("alice")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="framework output").wait_for()

    # nanoGPT's lines: loss and the MFU it prints, as printed.
    wait_for(lambda: len(_trace(page, "chart-loss", "loss")) >= 3, 240, "nanoGPT's loss")
    wait_for(lambda: len(_trace(page, "chart-mfu", "mfu")) >= 3, 30, "nanoGPT's mfu")
    assert "(printed)" in page.locator("#num-mfu").inner_text()
    assert "as the trainer prints it" in page.locator("#mfu-note").inner_text()
    # torchtitan's: its token rate read whole (5,8xx, not 5) on the throughput chart.
    wait_for(lambda: len(_trace(page, "chart-rate", "tps")) >= 3, 60, "torchtitan's tps")
    tps = page.evaluate(
        "() => document.getElementById('chart-rate').data.find((d) => d.name === 'tps').y"
    )
    assert all(5800 < y < 5800 + STEPS for y in tps), tps
    assert "tokens/s" in page.locator("#num-throughput").inner_text()
    alice.run(f"touch {GATE}.bar")
    # While the bar runs (it ends its line only with the job): its redraws are read poll by
    # poll, so its total gives the progress bar and an ETA, and its steps reach the charts.
    wait_for(
        lambda: (
            f"of {STEPS}" in page.locator("#progress-text").inner_text()
            and "ETA" in page.locator("#progress-text").inner_text()
        ),
        90,
        "the progress bar and ETA from the bar's total",
    )
    assert page.locator("#progress").is_visible()
    wait_for(lambda: len(_trace(page, "chart-rate", "it_per_s")) >= 2, 30, "tqdm's it/s, live")
    # Drawn before the bar's line ended: the poll that ends it brings its last step with it.
    bar_live = [x for x in _trace(page, "chart-loss", "loss") if x > 2 * STEPS // 3]
    assert bar_live and max(bar_live) < STEPS, bar_live
    shot = screenshot(page, "job-page-frameworks")
    for_docs(shot, "job-page-frameworks.png")
    alice.run(f"touch {GATE}.end")

    # Live all along: every point stored is drawn, once, on one curve across the phases.
    attempt = Attempt.objects.get(job=job)
    wait_for(
        lambda: Attempt.objects.filter(pk=attempt.pk, files_complete=True).exists(),
        120,
        "the job to end and its files to be read",
    )
    assert Attempt.objects.get(pk=attempt.pk).state == State.COMPLETED
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert len(set(loss.xs)) == len(loss.xs), loss.xs  # one value per step
    stored = dict(zip(loss.xs, loss.ys, strict=True))
    wait_for(
        lambda: _trace(page, "chart-loss", "loss") == sorted(stored),
        30,
        "every stored loss point",
    )
    assert _values(page, "chart-loss", "loss") == stored  # the newest value of each step
    assert {float(s) for s in range(1, 2 * STEPS // 3 + 1)} | {float(STEPS)} <= set(stored)
    bar = [x for x in stored if 2 * STEPS // 3 < x < STEPS]  # read before its line ended
    assert len(bar) >= 2, bar
    assert "finished" in page.locator("#progress-text").inner_text()
    reader = LogFile.objects.get(attempt=attempt, name="stdout.log").reader_state
    assert reader["total_steps"] == STEPS  # the bar's total, read from the log
    assert not errors, errors
