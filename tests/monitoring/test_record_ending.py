"""Record files through an attempt's life: found soon after the start, found once more and
read to their end after it ended (loggers that write as the job ends), stdout's copy kept
past the record's last step, NaN as a gap, and the points on the live stream."""

import json
import math
import shutil
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone
from tensorboard.compat.proto.event_pb2 import Event
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from clusters.agent import AgentRequest, run_agent
from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import WORKDIR_FILE
from monitoring.ingest.records import RecordsWatcher, record_sources
from monitoring.models import RecordSearch
from monitoring.records.tables import read_trainer_state
from monitoring.series.read import series_names, series_read
from projects.models import Project
from tests import factories
from tests.clusters.test_agent_client import LocalShell
from tests.monitoring.test_record_ingest import FIXTURES, points
from tests.security.ingest_helpers import ingest, reply_with, running

MAX_POLLS = 8  # an ended attempt's records take a few polls: workdir, find, reads


@pytest.fixture
def attempt(project: Project, member: User, tmp_path: Path) -> Attempt:
    """A running attempt whose command ran in tmp_path/work, its run directory tmp_path/run."""
    found = running(factories.job(project, member, factories.cluster())[1])
    run_dir, work = tmp_path / "run", tmp_path / "work"
    run_dir.mkdir()
    work.mkdir()
    (run_dir / WORKDIR_FILE).write_text(f"{work}\n")
    Attempt.objects.filter(pk=found.pk).update(
        run_dir=str(run_dir), started_at=timezone.now() - timedelta(minutes=5)
    )
    return Attempt.objects.select_related("job").get(pk=found.pk)


def poll(attempt: Attempt, home: Path, watcher: RecordsWatcher) -> set[int]:
    """One poll's records part through the real agent; the attempts left unread."""
    attempt = Attempt.objects.select_related("job").get(pk=attempt.pk)
    reads, listings = watcher.requests([attempt])
    reply = run_agent(LocalShell(home), AgentRequest(files=reads, listings=listings))
    return watcher.ingest([attempt], reply)


def polls_to_complete(attempt: Attempt, home: Path) -> int:
    """Polls of an ended attempt until the records watcher leaves it complete."""
    watcher = RecordsWatcher()
    for count in range(1, MAX_POLLS + 1):
        if attempt.pk not in poll(attempt, home, watcher):
            return count
    raise AssertionError(f"still unread after {MAX_POLLS} polls")


def write_events(folder: Path, scalars: list[tuple[str, int, float]]) -> None:
    """An events file as TensorBoard's own writer lays it out."""
    writer = EventFileWriter(str(folder))
    for tag, step, value in scalars:
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(Event(step=step, wall_time=time.time(), summary=summary))
    writer.close()


def end(attempt: Attempt) -> None:
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, ended_at=timezone.now())


def test_files_written_as_the_job_ends_are_found_and_read_before_its_files_are_complete(
    attempt: Attempt, tmp_path: Path
) -> None:
    watcher = RecordsWatcher()
    poll(attempt, tmp_path, watcher)  # the working directory
    poll(attempt, tmp_path, watcher)  # the first find: nothing yet
    assert RecordSearch.objects.get(attempt=attempt).searched_at is not None
    # Lightning's logger writes its events and metrics.csv as the job ends; the next find of
    # a running attempt is not due for a while.
    work = tmp_path / "work"
    version = work / "lightning_logs" / "version_0"
    version.mkdir(parents=True)
    write_events(version, [("train_loss", s, 1.0 / (s + 1)) for s in range(0, 64, 2)])
    (version / "metrics.csv").write_bytes(
        b"epoch,step,val_loss\n" + b"".join(b"%d,%d,0.5\n" % (e, 16 * e + 15) for e in range(4))
    )
    end(attempt)

    assert polls_to_complete(attempt, tmp_path) >= 2  # the find, then the reads
    assert RecordSearch.objects.get(attempt=attempt).final
    assert [x for x, _ in points(attempt, "train_loss")] == [float(s) for s in range(0, 64, 2)]
    assert points(attempt, "val_loss") == [(15.0, 0.5), (31.0, 0.5), (47.0, 0.5), (63.0, 0.5)]
    sources = record_sources(attempt_id=attempt.pk)
    assert sources["train_loss"] == "from TensorBoard events"
    assert sources["val_loss"] == "from metrics.csv"


def test_an_attempt_that_ended_before_any_poll_is_searched_and_read(
    attempt: Attempt, tmp_path: Path
) -> None:
    out = tmp_path / "work" / "out"
    out.mkdir()
    shutil.copy(FIXTURES / "hf" / "checkpoint-30" / "trainer_state.json", out)
    end(attempt)

    polls_to_complete(attempt, tmp_path)

    state = read_trainer_state((out / "trainer_state.json").read_bytes())
    want = [(float(s), v) for n, s, v in state.points if n == "loss"]
    assert points(attempt, "loss") == [(x, pytest.approx(y)) for x, y in want]
    # Complete now: a later poll asks for nothing more.
    assert poll(attempt, tmp_path, RecordsWatcher()) == set()


def test_a_running_attempt_is_searched_at_doubling_intervals_up_to_30_seconds(
    attempt: Attempt,
) -> None:
    watcher = RecordsWatcher()
    now = time.time()

    def find_due(ran: float, ago: float) -> bool:
        """Whether a find is asked for, the last one `ago` s back when the attempt had run `ran` s."""
        started = timezone.now() - timedelta(seconds=ran + ago)
        Attempt.objects.filter(pk=attempt.pk).update(started_at=started)
        RecordSearch.objects.update_or_create(
            attempt=attempt, defaults={"workdir": "/w", "searched_at": now - ago}
        )
        _, listings = watcher.requests([Attempt.objects.select_related("job").get(pk=attempt.pk)])
        return bool(listings)

    assert find_due(ran=1, ago=6) and not find_due(ran=1, ago=3)  # 5 s after the first
    assert find_due(ran=10, ago=11) and not find_due(ran=10, ago=8)
    assert find_due(ran=20, ago=21) and not find_due(ran=20, ago=15)
    assert find_due(ran=600, ago=31) and not find_due(ran=600, ago=25)  # then every 30 s
    end(attempt)
    assert find_due(ran=600, ago=1)  # the last find, once
    RecordSearch.objects.filter(attempt=attempt).update(final=True)
    assert not find_due(ran=600, ago=100)


def test_a_record_takes_stdouts_points_over_only_up_to_its_last_step(
    attempt: Attempt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_EVERY", 0.0)
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_FIRST", 0.0)
    out = tmp_path / "work" / "out"
    watcher = RecordsWatcher()
    record = {
        checkpoint: {
            float(s): v
            for n, s, v in read_trainer_state(
                (FIXTURES / "hf" / checkpoint / "trainer_state.json").read_bytes()
            ).points
            if n == "loss"
        }
        for checkpoint in ("checkpoint-10", "checkpoint-30")
    }

    def stdout(*steps: int) -> None:
        lines = b"".join(b"step %d loss 9.%d\n" % (s, s) for s in steps)
        ingest([attempt], reply_with({attempt: {"stdout.log": lines}}))

    def checkpoint(name: str) -> None:
        (out / name).mkdir(parents=True)
        shutil.copy(FIXTURES / "hf" / name / "trainer_state.json", out / name)
        for _ in range(3):
            poll(attempt, tmp_path, watcher)

    stdout(5, 10, 15)
    checkpoint("checkpoint-10")
    # The record's steps 5 and 10; stdout's 15 stays, and a new one past 10 is stored.
    stdout(20)
    assert points(attempt, "loss") == [
        (5.0, pytest.approx(record["checkpoint-10"][5.0])),
        (10.0, pytest.approx(record["checkpoint-10"][10.0])),
        (15.0, 9.15),
        (20.0, 9.2),
    ]
    stdout(10)  # at or below the record's last step: not stored
    assert dict(points(attempt, "loss"))[10.0] == pytest.approx(record["checkpoint-10"][10.0])

    stdout(25, 30, 35)
    checkpoint("checkpoint-30")  # the record reaches 30: stdout's 15..30 go, its 35 stays
    got = points(attempt, "loss")
    assert [x for x, _ in got] == [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0]
    assert got[:-1] == [(x, pytest.approx(y)) for x, y in record["checkpoint-30"].items()]
    assert got[-1] == (35.0, 9.35)
    assert series_names(attempt_id=attempt.pk).count("loss") == 1


def test_nan_in_every_kind_of_record_is_a_gap_at_its_step(
    attempt: Attempt, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_EVERY", 0.0)
    work = tmp_path / "work"
    write_events(
        work / "tb", [("grad_norm", 1, 0.5), ("grad_norm", 2, math.nan), ("grad_norm", 3, math.inf)]
    )
    (work / "csv").mkdir()
    (work / "csv" / "metrics.csv").write_text("epoch,step,val_loss\n0,4,0.7\n0,8,nan\n")
    # HF writes trainer_state.json with json.dumps, NaN as the bare token.
    history = [{"loss": 2.0, "step": 5}, {"loss": math.nan, "step": 10}]
    (work / "trainer_state.json").write_text(json.dumps({"log_history": history}, indent=2))
    for _ in range(3):
        poll(attempt, tmp_path, RecordsWatcher())

    def read(name: str) -> tuple[list[float], list[float | None], list[float]]:
        data = series_read(attempt_id=attempt.pk, name=name)
        xs, ys = data.with_gaps()
        return xs, ys, list(data.nonfinite)

    assert read("grad_norm") == ([1.0, 2.0, 3.0], [0.5, None, None], [2.0, 3.0])
    assert read("val_loss") == ([4.0, 8.0], [pytest.approx(0.7), None], [8.0])
    assert read("loss") == ([5.0, 10.0], [2.0, None], [10.0])


def test_record_points_go_out_on_the_live_stream(
    attempt: Attempt,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    django_capture_on_commit_callbacks: Any,
) -> None:
    monkeypatch.setattr("monitoring.ingest.records.SEARCH_EVERY", 0.0)
    sent: list[dict[str, Any]] = []
    monkeypatch.setattr(
        "monitoring.ingest.records.push_built", lambda build: sent.extend(build({attempt.job_id}))
    )
    write_events(tmp_path / "work" / "tb", [("train/loss", 2, 0.75), ("train/loss", 4, math.nan)])
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            poll(attempt, tmp_path, RecordsWatcher())

    assert sent == [
        {
            "type": "job.delta",
            "job": attempt.job_id,
            "attempt": attempt.number,
            "series": {"loss": [[2.0, 0.75], [4.0, None]]},
            "nonfinite": {"loss": [4.0]},
        }
    ]


def test_a_job_started_in_the_accounts_home_is_searched_in_its_run_directory_only(
    attempt: Attempt, tmp_path: Path
) -> None:
    """The batch script writes an empty line for the account's home (every job's): only the
    run directory is searched, and the working-directory file is not read again each poll."""
    (Path(attempt.run_dir) / WORKDIR_FILE).write_text("\n")
    watcher = RecordsWatcher()
    poll(attempt, tmp_path, watcher)
    assert RecordSearch.objects.get(attempt=attempt).workdir == attempt.run_dir
    reads, listings = watcher.requests([attempt])
    assert not [r for r in reads if r.path.endswith(WORKDIR_FILE)]
    assert {listing.path for listing in listings} <= {attempt.run_dir}
