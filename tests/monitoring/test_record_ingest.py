"""Trainers' record files through the poll: found by the real agent in the job's working
tree, read by offset, stored as series that replace stdout's copy and name their source."""

import os
import shutil
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.agent import AgentRequest, run_agent
from jobs.models import Attempt
from jobs.rundir import WORKDIR_FILE
from monitoring.ingest.records import RecordsWatcher, record_sources
from monitoring.models import RecordFile
from monitoring.records.tables import read_trainer_state
from monitoring.records.tfevents import read_events
from monitoring.series.read import series_names, series_read
from projects.models import Project
from tests import factories
from tests.clusters.test_agent_client import LocalShell
from tests.security.ingest_helpers import ingest, reply_with, running

FIXTURES = Path(__file__).parent / "fixtures" / "records"


@pytest.fixture
def attempt(project: Project, member: User, tmp_path: Path) -> Attempt:
    found = running(factories.job(project, member, factories.cluster())[1])
    run_dir, work = tmp_path / "run", tmp_path / "work"
    run_dir.mkdir()
    work.mkdir()
    (run_dir / WORKDIR_FILE).write_text(f"{work}\n")
    Attempt.objects.filter(pk=found.pk).update(
        run_dir=str(run_dir), started_at=timezone.now() - timedelta(minutes=5)
    )
    found.refresh_from_db()
    return found


def poll(attempt: Attempt, home: Path, watcher: RecordsWatcher) -> None:
    """One poll's records part: the watcher's requests, run by the real agent, ingested."""
    reads, listings = watcher.requests([attempt])
    reply = run_agent(LocalShell(home), AgentRequest(files=reads, listings=listings))
    watcher.ingest([attempt], reply)


def points(attempt: Attempt, name: str) -> list[tuple[float, float]]:
    data = series_read(attempt_id=attempt.pk, name=name)
    return list(zip(data.xs, data.ys, strict=True))


def test_hf_events_found_in_the_working_tree_replace_stdouts_loss(
    attempt: Attempt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # stdout printed HF's log dict first: its `loss` is a series until a record gives it.
    ingest(
        [attempt],
        reply_with({attempt: {"stdout.log": b"{'loss': 9.9, 'step': 5}\nstep 5 loss 9.9\n"}}),
    )
    work = tmp_path / "work"
    events = next((FIXTURES / "hf").glob("events.out.tfevents.*"))
    target = work / "out" / "runs" / "Dec06" / events.name
    target.parent.mkdir(parents=True)
    data = events.read_bytes()
    half = len(data) // 2
    target.write_bytes(data[:half])  # the writer is mid-record
    (work / "old").mkdir()
    shutil.copy(events, work / "old" / events.name)
    old = time.time() - 3600
    os.utime(work / "old" / events.name, (old, old))
    watcher = RecordsWatcher()
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_EVERY", 0.0)

    poll(attempt, tmp_path, watcher)  # the working directory
    poll(attempt, tmp_path, watcher)  # the find, and the first bytes
    poll(attempt, tmp_path, watcher)
    (record,) = RecordFile.objects.filter(attempt=attempt)
    assert record.path == str(target) and record.kind == "tfevents"
    assert 0 < record.offset <= half
    with target.open("ab") as out:
        out.write(data[half:])
    poll(attempt, tmp_path, watcher)
    poll(attempt, tmp_path, watcher)

    expected = read_events(data).points
    for name in ("loss", "eval_loss", "learning_rate"):
        want = [(float(s), v) for n, s, v in expected if n == name]
        assert points(attempt, name) == [(x, pytest.approx(y)) for x, y in want]
    assert 9.9 not in [y for _, y in points(attempt, "loss")]
    assert record_sources(attempt_id=attempt.pk)["loss"] == "from TensorBoard events"
    # One series per metric: no stdout copy beside the record's.
    assert len(series_names(attempt_id=attempt.pk)) == len({n for n, _, _ in expected})

    # Later stdout lines of a claimed metric are stored only past the record's last step (30).
    ingest(
        [attempt], reply_with({attempt: {"stdout.log": b"step 25 loss 7.7\nstep 40 loss 7.7\n"}})
    )
    assert [(x, y) for x, y in points(attempt, "loss") if x in (25.0, 40.0)] == [
        (25.0, pytest.approx(next(v for n, s, v in expected if n == "loss" and s == 25))),
        (40.0, 7.7),
    ]


def test_trainer_states_of_each_checkpoint_and_a_rewritten_csv_never_duplicate(
    attempt: Attempt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = tmp_path / "work"
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_EVERY", 0.0)
    watcher = RecordsWatcher()
    for checkpoint in ("checkpoint-10", "checkpoint-30"):
        (work / "out" / checkpoint).mkdir(parents=True)
        shutil.copy(FIXTURES / "hf" / checkpoint / "trainer_state.json", work / "out" / checkpoint)
    csv = work / "lightning_logs" / "version_0" / "metrics.csv"
    csv.parent.mkdir(parents=True)
    csv.write_bytes(b"epoch,step,train_loss\r\n0,1,0.5\r\n0,3,0.4\r\n")
    for _ in range(3):
        poll(attempt, tmp_path, watcher)
    # Lightning's CSVLogger rewrites the file whole when a new name appears.
    csv.write_bytes(b"epoch,step,train_loss,val_loss\r\n0,1,0.5,\r\n0,3,0.4,\r\n0,3,,0.9\r\n")
    for _ in range(3):
        poll(attempt, tmp_path, watcher)

    state = read_trainer_state((FIXTURES / "hf/checkpoint-30/trainer_state.json").read_bytes())
    want = [(float(s), v) for n, s, v in state.points if n == "loss"]
    assert points(attempt, "loss") == [(x, pytest.approx(y)) for x, y in want]
    assert points(attempt, "train_loss") == [(1.0, 0.5), (3.0, 0.4)]
    assert points(attempt, "val_loss") == [(3.0, 0.9)]
    assert record_sources(attempt_id=attempt.pk)["val_loss"] == "from metrics.csv"
