"""Issue 32's acceptance: researchers' real code, run unchanged the usual way, gets the right curves.

Each case runs a real framework in the jobs' Python on the sandbox (pinned there by
clusters.sandbox.pyenv; tiny models built from configs, nothing downloaded), submitted as a
researcher would, and compares what the portal charted with the framework's own record of
what it logged: Hugging Face's trainer_state.json, Lightning's and Accelerate's TensorBoard
logger (read on the cluster by TensorBoard's own reader), Keras' History, a plain script's
JSON lines. Per case: at least 95 % of the record's points charted at the right step, no
wrong value, no series the run did not log, and points charted while the job ran. Each
case's row lands in test-artifacts/frameworks-matrix.json.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs.enums import FINAL_STATES, State, Template
from jobs.models import Attempt
from jobs.services import job_submit
from monitoring.series.read import series_names, series_read
from tests.factories import spec
from tests.helpers import PASSWORD, QUEUE_WAIT, screenshot, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = Path(__file__).with_name("trainers") / "real"
ARTIFACT = ROOT / "test-artifacts" / "frameworks-matrix.json"
REMOTE = "portal-frameworks"
# A value as printed: Transformers prints 4 significant digits, Keras 4 decimals.
REL_TOL, ABS_TOL = 2e-3, 6e-5
# Series every run may have beside its record: the bars' rates and the epoch counter.
RATES = re.compile(r"(^|_)(it|its|it_per_s|s_per_it|steps?_per_s(ec(ond)?)?|epoch)$")
# TensorBoard's own reader, run in the jobs' Python: the record of a TensorBoard logger.
TB_RECORD = """
import glob, json, sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
out = []
for path in sorted(glob.glob(sys.argv[1] + "/**/events.out.tfevents.*", recursive=True)):
    acc = EventAccumulator(path, size_guidance={"scalars": 0})
    acc.Reload()
    for tag in acc.Tags()["scalars"]:
        out += [[tag, e.step, e.value] for e in acc.Scalars(tag)]
print(json.dumps(out))
"""


@dataclass(frozen=True)
class Case:
    name: str
    script: str
    args: str = ""
    record: str = ""  # how the framework's own record is read: see _record
    required: tuple[str, ...] = ()  # record names the chart must hold
    template: str = Template.COMMAND
    gpus: int = 1
    # The record holds every value the run prints (no bar shows values between records):
    # a charted point the record lacks is a value at a wrong step.
    exact: bool = True
    # Also open the job page in Chromium: its loss chart, named by its source, and a picture.
    page: bool = False


CASES = [
    Case(
        "hf-trainer-defaults",
        "hf_trainer.py",
        record="trainer_state",
        required=("loss", "grad_norm", "learning_rate", "eval_loss"),
        page=True,
    ),
    Case(
        "hf-trainer-no-bars",
        "hf_trainer.py",
        "--no-bars",
        record="trainer_state",
        required=("loss", "grad_norm", "learning_rate", "eval_loss"),
    ),
    Case(
        "hf-trainer-torchrun-2-ranks",
        "hf_trainer.py",
        record="trainer_state",
        required=("loss", "grad_norm", "learning_rate", "eval_loss"),
        template=Template.TORCHRUN,
        gpus=2,
    ),
    Case(
        "lightning-rich-bar",
        "lightning_fit.py",
        record="tensorboard",
        required=("train_loss", "val_loss"),
        exact=False,  # the bar shows each step's loss; the logger keeps every fifth
    ),
    Case(
        "lightning-tqdm-bar",
        "lightning_fit.py",
        "--tqdm",
        record="tensorboard",
        required=("train_loss", "val_loss"),
        exact=False,  # the bar shows each step's loss; the logger keeps every fifth
    ),
    Case(
        "keras-fit-verbose-1",
        "keras_fit.py",
        "--verbose 1",
        record="keras_history",
        required=("loss", "val_loss"),
        exact=False,  # the bar shows running means within the epoch; History its end
    ),
    Case(
        "keras-fit-verbose-2",
        "keras_fit.py",
        "--verbose 2",
        record="keras_history",
        required=("loss", "val_loss"),
    ),
    Case(
        "accelerate-loop",
        "accelerate_loop.py",
        record="tensorboard",
        required=("train_loss", "lr"),
    ),
    Case("plain-script", "plain_loop.py", record="jsonl", required=("loss", "lr")),
]


@dataclass
class Row:
    case: str
    record_points: int = 0
    charted_right: int = 0
    wrong_values: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_charted: list[str] = field(default_factory=list)  # a record point absent at its step
    extra: list[str] = field(default_factory=list)  # a charted point the record lacks
    spurious_series: list[str] = field(default_factory=list)
    live_points: int = 0
    seconds: float = 0.0

    @property
    def share(self) -> float:
        return self.charted_right / self.record_points if self.record_points else 0.0


def normal(name: str) -> str:
    """One spelling for a metric however a source names it: TensorBoard's `train/loss` is
    stdout's `loss`, `eval/loss` its `eval_loss`; a source label in brackets is not the name."""
    name = re.sub(r"\s*[\[(].*$", "", name.strip().lower())
    if name.startswith("train/"):
        name = name[len("train/") :]
    return name.replace("/", "_").replace("-", "_").replace(" ", "_")


def _record(alice, case: Case, workdir: str) -> list[tuple[str, int, float]]:
    """The framework's own record: (name, step, value) for every value it logged."""
    where = shlex.quote(workdir)
    if case.record == "trainer_state":
        state = json.loads(alice.run(f"cat {where}/out/trainer_state.json").stdout)
        return [
            (name, entry["step"], float(value))
            for entry in state["log_history"]
            for name, value in entry.items()
            if name not in ("step", "epoch") and isinstance(value, int | float)
        ]
    if case.record == "tensorboard":
        python = f"{REMOTE}/python-record.py"
        alice.upload(python, TB_RECORD.encode(), mode=0o600)
        out = alice.run(f"python3 {python} {where}").stdout
        return [(tag, step, value) for tag, step, value in json.loads(out) if tag != "epoch"]
    if case.record == "keras_history":
        history = json.loads(alice.run(f"cat {where}/history.json").stdout)
        per_epoch = 16  # 256 training samples in batches of 16
        return [
            (name, (epoch + 1) * per_epoch, float(value))
            for name, values in history.items()
            for epoch, value in enumerate(values)
        ]
    lines = alice.run(f"cat {where}/record.jsonl").stdout.decode().splitlines()
    rows = [json.loads(line) for line in lines]
    return [(n, r["step"], float(r[n])) for r in rows for n in ("loss", "lr")]


def _compare(row: Row, attempt_id: int, record: list[tuple[str, int, float]], case: Case) -> None:
    names = series_names(attempt_id=attempt_id)
    charted = {normal(n): n for n in names if not n.startswith("gpu")}
    record_names = {normal(name) for name, _, _ in record}
    for name in sorted(set(charted) - record_names):
        if not RATES.search(name) and name not in ("mfu", "throughput"):
            row.spurious_series.append(charted[name])
    row.missing = [n for n in case.required if normal(n) not in charted]
    cache: dict[str, dict[float, float]] = {}
    for name, step, value in record:
        row.record_points += 1
        series = charted.get(normal(name))
        if series is None:
            continue
        if series not in cache:
            data = series_read(attempt_id=attempt_id, name=series, max_points=100_000)
            cache[series] = dict(zip(data.xs, data.ys, strict=True))
        got = cache[series].get(float(step))
        if got is None:
            row.not_charted.append(f"{name}@{step}")
            continue
        if math.isclose(got, value, rel_tol=REL_TOL, abs_tol=ABS_TOL) or (
            math.isnan(value) and math.isnan(got)
        ):
            row.charted_right += 1
        else:
            row.wrong_values.append(f"{name}@{step}: {got} (logged {value})")
    steps: dict[str, set[float]] = {}
    for name, step, _ in record:
        steps.setdefault(normal(name), set()).add(float(step))
    for name, points in cache.items():
        extra = sorted(set(points) - steps.get(normal(name), set()))
        row.extra += [f"{name}@{x:g}={points[x]:g}" for x in extra]


def _save(row: Row) -> None:
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    try:
        rows = json.loads(ARTIFACT.read_text())
    except (OSError, ValueError):
        rows = {}
    rows[row.case] = {**row.__dict__, "share": round(row.share, 3)}
    ARTIFACT.write_text(json.dumps(rows, indent=1, sort_keys=True))


def _page_shows(request: pytest.FixtureRequest, job_id: int, loss: int) -> None:
    """The job page as its owner sees it once the run ended: every loss point on the loss
    chart, under the name of the file it came from."""
    page, server = request.getfixturevalue("page"), request.getfixturevalue("asgi_server")
    researcher = request.getfixturevalue("researcher")
    researcher.set_password(PASSWORD)
    researcher.save()
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{server}/login/?next=/jobs/{job_id}/")
    page.get_by_label("User name").fill(researcher.username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    shown = """() => (document.getElementById('chart-loss')?.data || [])
        .map((d) => [d.name, d.x.length])"""
    try:
        wait_for(lambda: [n for _, n in page.evaluate(shown)][:1] == [loss], 60, "the chart")
    finally:
        screenshot(page, "frameworks-hf-trainer")
    assert page.evaluate(shown)[0][0] == "loss (from trainer_state.json)", page.evaluate(shown)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_framework_run_charts_its_own_record(
    case: Case, request, celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    alice.run(f"mkdir -p -m 700 {REMOTE}")
    alice.upload(f"{REMOTE}/{case.script}", (TRAINERS / case.script).read_bytes(), mode=0o600)
    script = f"$HOME/{REMOTE}/{case.script}"
    command = (
        f"{script} {case.args}"
        if case.template == Template.TORCHRUN
        else (f"python3 {script} {case.args}")
    )
    started = time.monotonic()
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name=case.name,
            template=case.template,
            command=command.strip(),
            # Each run in its own directory, as a researcher's checkout would be; offline.
            setup='mkdir -p "$HOME/runs/$PORTAL_JOB_ID" && cd "$HOME/runs/$PORTAL_JOB_ID"\n'
            "export HF_HUB_OFFLINE=1 KERAS_BACKEND=torch",
            gpus_per_node=case.gpus,
            cpus_per_task=2,
        ),
    )
    attempt = Attempt.objects.get(job=job)
    row = Row(case.name)
    required = [normal(n) for n in case.required]

    def live() -> bool:
        """Until the job ends: how many points the page had while it still ran."""
        current = Attempt.objects.get(pk=attempt.pk)
        if current.state == State.RUNNING:
            names = {normal(n): n for n in series_names(attempt_id=attempt.pk)}
            points = sum(
                len(series_read(attempt_id=attempt.pk, name=names[n]).xs)
                for n in required
                if n in names
            )
            row.live_points = max(row.live_points, points)
        return current.state in FINAL_STATES and current.files_complete

    try:
        wait_for(live, QUEUE_WAIT + 300, f"{case.name} to end and its files to be read")
    except TimeoutError as waited:
        # Name where it stood: queued behind other tests' GPUs, running, or ended unread.
        current = Attempt.objects.get(pk=attempt.pk)
        raise AssertionError(
            f"{waited}: state {current.state}, slurm id {current.slurm_job_id}, "
            f"files complete {current.files_complete}, started {current.started_at}"
        ) from waited
    row.seconds = round(time.monotonic() - started, 1)
    attempt.refresh_from_db()
    assert attempt.state == State.COMPLETED, attempt.state
    workdir = alice.run(f"cat {shlex.quote(attempt.run_dir)}/workdir").stdout.decode().strip()
    record = _record(alice, case, workdir)
    assert record, "the framework logged nothing"
    _compare(row, attempt.pk, record, case)
    _save(row)
    assert not row.missing, row
    assert not row.wrong_values, row
    assert not row.spurious_series, row
    assert not (case.exact and row.extra), row
    assert row.share >= 0.95, row
    assert row.live_points >= 2, row
    if case.page:
        _page_shows(request, job.pk, sum(1 for name, _, _ in record if name == "loss"))
