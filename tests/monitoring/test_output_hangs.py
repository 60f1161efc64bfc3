"""Hangs of a job known by its output alone: the steps the ingest read are progress.

Each poll runs as the pipeline runs it: the ingest stores the stdout bytes and their
steps, then the progress watcher judges. A plain script (no heartbeat helper, no rank
labels) that stops stepping is flagged with its last line and cancelled for its
restart policy like a heartbeat hang; one that keeps stepping past its startup window
is never a startup stall.
"""

import re
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.agent import AgentReply, FileChunk
from jobs.billing import attempt_charge, attempt_reserve
from jobs.enums import FailureClass, State
from jobs.models import Attempt, JobEvent
from jobs.rundir import file_key, stack_file
from monitoring.diagnosis.hang import hang_diagnosis
from monitoring.goodput.card import attempt_card_compute
from monitoring.hangs.output import LAST_LINE_CHARS, last_line, output_steps, steps_are_records
from monitoring.hangs.selectors import job_hangs
from monitoring.hangs.stacks import REQUEST_STACKS
from monitoring.hangs.watch import ProgressWatcher
from monitoring.models import (
    AttemptActivity,
    AttemptIngest,
    AttemptProgress,
    EfficiencyCard,
    LogFile,
    RecordFile,
)
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with

pytestmark = pytest.mark.django_db

# As `print(f"step {i} loss {loss:.4f}", flush=True)` prints them.
STEPS = b"".join(b"step %d loss %.4f\n" % (i, 2.5 / i) for i in range(1, 161))


@pytest.fixture
def plain(project: Project, owner: User) -> Attempt:
    """A plain script's running attempt, started an hour ago (past a 60 s startup window)."""
    _, attempt = factories.job(
        project,
        owner,
        factories.cluster(),
        hang_floor_seconds=10,
        hang_multiple=3.0,
        startup_window_seconds=60,
        max_restarts=1,
        restart_on=[FailureClass.HANG],
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING,
        run_dir=f"/runs/{attempt.uuid}",
        slurm_job_id="91",
        node_list="n1",
        started_at=timezone.now() - timedelta(hours=1),
    )
    return Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk)


def _poll(attempt: Attempt, stdout: bytes, extra: dict[str, bytes] | None = None) -> None:
    """One poll: the ingest, then the progress watcher, on the same reply."""
    reply = reply_with({attempt: {"stdout.log": stdout}} if stdout else {})
    ingest([attempt], reply)
    files = dict(reply.files)
    for key, data in (extra or {}).items():
        files[key] = FileChunk(0, data, len(data), more=False, error=None, inode=1)
    watcher = ProgressWatcher()
    watcher.requests([attempt])
    watcher.ingest([attempt], AgentReply(time=time.time(), files=files))


def _last_step_ago(attempt: Attempt, seconds: float) -> None:
    """As if the polls that saw its last steps (one every 2 s) were `seconds` ago."""
    row = AttemptProgress.objects.get(attempt=attempt)
    top = row.pace[-1][1]
    at = time.time() - seconds
    row.pace = [[at - 2 * (4 - i), top - 4 + i] for i in range(5)]
    row.save(update_fields=["pace"])


def test_a_plain_script_that_stops_stepping_is_flagged_with_its_last_line_then_cancelled(
    plain, monkeypatch
) -> None:
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr("monitoring.hangs.watch.queue_on_commit", lambda *a: queued.append(a))
    monkeypatch.setattr("jobs.services.queue_on_commit", lambda *a: queued.append(a))
    _poll(plain, STEPS)
    progress = AttemptProgress.objects.get(attempt=plain)
    assert progress.verdict == "" and progress.ranks == {}
    assert progress.pace[-1][1] == 160  # the output's step is the attempt's progress

    # It prints no step since (it sleeps), then one line that is not a step.
    _last_step_ago(plain, 40)
    _poll(plain, b"waiting for the data server at 10.0.0.7:8080\n")
    progress.refresh_from_db()
    assert progress.verdict == "hang"
    assert progress.threshold_seconds == 10.0  # 3 x its 2 s steps is under the floor
    assert progress.last_step == 160 and progress.culprit_rank is None
    assert progress.why.startswith("No step in its output for 40 s (this job's limit: 10 s)")
    assert "the last step was 160." in progress.why
    assert progress.why.endswith("Its last line: waiting for the data server at 10.0.0.7:8080")
    assert queued == [(REQUEST_STACKS, plain.pk)]
    assert JobEvent.objects.filter(attempt=plain, reason__startswith="Hung: No step").count() == 1

    # Its stack comes in (the run directory's faulthandler answers for a plain script):
    # the restart policy lists "hang", so the portal cancels it as for a heartbeat hang.
    dump = b"# rank 0 pid 9 node n1\nThread 0x00007f (most recent call first):\n  File x\n"
    _poll(plain, b"", {file_key(plain.uuid, stack_file(0)): dump})
    progress.refresh_from_db()
    assert set(progress.stacks) == {"0"}
    assert progress.hang_cancelled_at is not None
    assert queued[-1] == ("jobs.tasks.cancel_attempt", plain.pk)
    found = hang_diagnosis(attempt=plain)
    assert found is not None and found.failure_class == FailureClass.HANG
    assert found.rank is None and found.node == ""  # no rank to blame, no node to leave out
    # Its card shows the stack it dumped, though no rank reported progress.
    (card,) = job_hangs(attempts=[plain])
    assert card["ranks"] == [] and [s["rank"] for s in card["stacks"]] == [0]
    assert "most recent call first" in card["stacks"][0]["text"]


def test_the_stack_is_waited_for_before_the_cancel(plain, monkeypatch) -> None:
    """A plain script is no stopped heartbeat: its stack may still come, so the cancel waits
    for it (or for the policy's wait)."""
    monkeypatch.setattr("monitoring.hangs.watch.queue_on_commit", lambda *a: None)
    monkeypatch.setattr("jobs.services.queue_on_commit", lambda *a: None)
    _poll(plain, STEPS)
    _last_step_ago(plain, 40)
    _poll(plain, b"")
    _poll(plain, b"")  # flagged a moment ago: no stack yet, inside the 15 s wait
    progress = AttemptProgress.objects.get(attempt=plain)
    assert progress.verdict == "hang" and progress.hang_cancelled_at is None


def test_a_healthy_plain_job_past_its_startup_window_is_never_a_startup_stall(plain) -> None:
    # An hour in, a 60 s startup window: its steps came from its output only.
    _poll(plain, STEPS[: STEPS.index(b"step 100 ")])
    _poll(plain, STEPS[STEPS.index(b"step 100 ") :])
    progress = AttemptProgress.objects.get(attempt=plain)
    assert progress.verdict == "" and progress.why == ""
    assert progress.pace[-1][1] == 160
    assert progress.threshold_seconds == 10.0  # the hang limit, not the startup window
    assert not JobEvent.objects.filter(attempt=plain, reason__contains="Startup stall").exists()


def test_no_step_from_any_source_past_the_startup_window_is_still_a_stall(plain) -> None:
    _poll(plain, b"loading the dataset\n")
    progress = AttemptProgress.objects.get(attempt=plain)
    assert progress.verdict == "startup"
    assert "No first step, on any rank or in its output," in progress.why
    assert progress.why.endswith("Its last line: loading the dataset")


def test_a_job_whose_output_is_no_longer_read_is_not_judged_by_it(plain) -> None:
    """Over its parse budget its steps are not read: quiet output says nothing then."""
    _poll(plain, STEPS)
    AttemptIngest.objects.filter(attempt=plain).update(metrics_stopped=True)
    _last_step_ago(plain, 40)
    _poll(plain, b"step 161 loss 0.01\n")
    assert AttemptProgress.objects.get(attempt=plain).verdict == ""


def test_output_steps_are_the_furthest_step_of_any_file(plain) -> None:
    LogFile.objects.create(attempt=plain, name="stdout.log", last_step=41)
    LogFile.objects.create(attempt=plain, name="metrics.jsonl", last_step=40)
    LogFile.objects.create(attempt=plain, name="gpu-n1.csv")
    found = output_steps(attempt_ids=[plain.pk])
    assert (found[plain.pk].step, found[plain.pk].read) == (41, True)
    # A trainer's own record file (TensorBoard events) further on: its step is progress too.
    path = "/home/alice/runs/events.out.tfevents.1.n1"
    RecordFile.objects.create(attempt=plain, path=path, kind="tfevents", last_step=45)
    assert output_steps(attempt_ids=[plain.pk])[plain.pk].step == 45


def test_counted_records_are_said_to_be_records(plain, monkeypatch) -> None:
    monkeypatch.setattr("monitoring.hangs.watch.queue_on_commit", lambda *a: None)
    # The reader read no step and numbered 26 step-less records (0 first).
    log = LogFile.objects.create(
        attempt=plain, name="stdout.log", last_step=25, reader_state={"counted": 25}
    )
    assert steps_are_records(attempt_id=plain.pk)
    _poll(plain, b"")
    _last_step_ago(plain, 40)
    _poll(plain, b"")
    why = AttemptProgress.objects.get(attempt=plain).why
    assert "No new record in its output for 40 s" in why and "it printed 26 records" in why
    assert not re.search(r"step \d", why)  # no record number passed off as a step
    # A step printed once, or a file with steps of its own: the numbers are steps.
    log.reader_state = {"counted": 25, "step": 3}
    log.save()
    assert not steps_are_records(attempt_id=plain.pk)
    log.reader_state = {"counted": 25}
    log.save()
    LogFile.objects.update_or_create(
        attempt=plain, name="metrics.jsonl", defaults={"last_step": 25}
    )
    assert not steps_are_records(attempt_id=plain.pk)
    LogFile.objects.filter(attempt=plain, name="metrics.jsonl").update(last_step=None)
    assert steps_are_records(attempt_id=plain.pk)
    RecordFile.objects.create(attempt=plain, path="/w/metrics.csv", kind="csv", last_step=25)
    assert not steps_are_records(attempt_id=plain.pk)


def test_the_last_line_is_the_newest_redraw_printable_and_capped(plain) -> None:
    ingest([plain], reply_with({plain: {"stdout.log": b"epoch 1\n"}}))
    assert last_line(attempt_id=plain.pk) == "epoch 1"
    bar = (
        b" 40%|\x1b[32m####\x1b[0m      | 40/100 [00:10<00:15]\r 41%|####      | 41/100\x07\n\n \n"
    )
    ingest([plain], reply_with({plain: {"stdout.log": bar}}))
    assert last_line(attempt_id=plain.pk) == "41%|####      | 41/100"
    ingest([plain], reply_with({plain: {"stdout.log": b"x" * 10_000}}))  # no newline yet
    assert last_line(attempt_id=plain.pk) == "x" * LAST_LINE_CHARS + "…"


def test_the_card_of_a_plain_script_counts_its_hang_from_its_last_output_step(
    project: Project, owner: User
) -> None:
    """No rank's step time to count from: the furthest step its output gave, as the poll saw it."""
    _, attempt = factories.job(project, owner, factories.cluster(), gpus_per_node=1)
    attempt_reserve(attempt=attempt)
    start = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.CANCELLED, run_dir="/runs/p", slurm_job_id="42", started_at=start,
        ended_at=start + timedelta(seconds=600), files_complete=True,
    )  # fmt: skip
    attempt.refresh_from_db()
    # Its first printed step ended its startup (the goodput watch reads it from its files).
    AttemptActivity.objects.create(attempt=attempt, first_step_at=start + timedelta(seconds=30))
    last = (start + timedelta(seconds=480)).timestamp()
    AttemptProgress.objects.create(
        attempt=attempt, verdict="hang", pace=[[last - 2, 159.0], [last, 160.0]]
    )
    attempt_charge(attempt=attempt, measured=None)
    attempt_card_compute(attempt=attempt)
    parts = EfficiencyCard.objects.get(attempt=attempt).data["parts"]
    assert parts["hung"] * 3600 == pytest.approx(120)  # 480 s to 600 s on its one GPU
