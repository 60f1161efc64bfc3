"""The poll's side of hangs, on a reply as the agent sends it: reads are capped, a hang is
flagged once with its culprit, stacks are asked for, and the restart policy cancels it."""

import json
import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.agent import AgentReply, FileChunk, FileRead
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, JobEvent
from jobs.rundir import STDOUT_FILE, file_key, progress_file, stack_file
from monitoring.diagnosis.hang import hang_diagnosis
from monitoring.hangs.heartbeats import HEARTBEAT_READ
from monitoring.hangs.stacks import REQUEST_STACKS, STACK_READ_BYTES
from monitoring.hangs.watch import MAX_RANKS, ProgressWatcher
from monitoring.models import AttemptProgress
from projects.models import Project
from tests import factories

pytestmark = pytest.mark.django_db


def _chunk(data: bytes) -> FileChunk:
    return FileChunk(offset=0, data=data, size=len(data), more=False, error=None, inode=1)


def _record(rank: int, node: str, step: int, step_time: float, alive: float) -> bytes:
    body = {"v": 1, "rank": rank, "node": node, "step": step, "step_time": step_time}
    body |= {"alive": alive, "pause": None, "pause_since": None, "resumed": None}
    return json.dumps(body).encode().ljust(511) + b"\n"


@pytest.fixture
def running(project: Project, owner: User) -> Attempt:
    job, attempt = factories.job(
        project,
        owner,
        factories.cluster(),
        template=Template.TORCHRUN,
        nodes=2,
        gpus_per_node=1,
        hang_floor_seconds=10,
        hang_multiple=3.0,
        max_restarts=1,
        restart_on=[FailureClass.HANG],
    )
    attempt.state, attempt.run_dir, attempt.slurm_job_id = State.RUNNING, "/runs/a1", "77"
    attempt.started_at = timezone.now() - timedelta(seconds=120)
    attempt.save()
    attempt.job = job
    return attempt


def _poll(watcher: ProgressWatcher, attempt: Attempt, files: dict[str, bytes]) -> list[FileRead]:
    reads, listings = watcher.requests([attempt])
    assert not listings
    reply = AgentReply(time=time.time(), files={k: _chunk(v) for k, v in files.items()})
    watcher.ingest([attempt], reply)
    return reads


def test_a_stopped_rank_is_flagged_then_cancelled_once_the_others_stacks_are_in(
    running, monkeypatch
) -> None:
    # What it queues (the e2e test runs the tasks for real on the sandbox).
    queued: list[tuple[object, ...]] = []
    monkeypatch.setattr("monitoring.hangs.watch.queue_on_commit", lambda *a: queued.append(a))
    # The cancel goes through the jobs service (its claim and final-state guard).
    monkeypatch.setattr("jobs.services.queue_on_commit", lambda *a: queued.append(a))
    watcher = ProgressWatcher()
    now = time.time()
    # Earlier polls saw a step a second up to step 40, 30 s ago.
    pace = [[now - 30 - (40 - s), float(s)] for s in range(25, 41)]
    AttemptProgress.objects.create(attempt=running, pace=pace)
    beat = {
        file_key(running.uuid, progress_file(0)): _record(0, "n1", 40, now - 30, now - 0.5),
        file_key(running.uuid, progress_file(1)): _record(1, "n2", 40, now - 30, now - 29.5),
    }
    reads = _poll(watcher, running, beat)
    # One capped read per rank; no stacks asked for yet.
    assert [(r.key, r.limit) for r in reads] == [
        (file_key(running.uuid, progress_file(r)), HEARTBEAT_READ) for r in (0, 1)
    ]
    progress = AttemptProgress.objects.get(attempt=running)
    assert (progress.verdict, progress.culprit_rank, progress.culprit_node) == ("hang", 1, "n2")
    assert queued == [(REQUEST_STACKS, running.pk)]
    assert JobEvent.objects.filter(attempt=running, reason__startswith="Hung: ").count() == 1

    # The next poll reads the stacks (capped); rank 0 answered, rank 1 (stopped) did not.
    dump = b"# rank 0 pid 9 node n1\nThread 0x00007f (most recent call first):\n  File x\n"
    stacks = {
        file_key(running.uuid, stack_file(0)): dump,
        file_key(running.uuid, stack_file(1)): b"# rank 1 pid 10 node n2\n",
    }
    reads = _poll(watcher, running, {**beat, **stacks})
    assert {(r.key, r.limit) for r in reads} >= {
        (file_key(running.uuid, stack_file(r)), STACK_READ_BYTES) for r in (0, 1)
    }
    progress.refresh_from_db()
    assert set(progress.stacks) == {"0"} and "most recent call first" in progress.stacks["0"]
    assert progress.hang_cancelled_at is not None  # the policy lists "hang"
    assert queued[-1] == ("jobs.tasks.cancel_attempt", running.pk)
    running.refresh_from_db()
    assert running.cancel_requested_at is not None
    found = hang_diagnosis(attempt=running)
    assert found is not None and found.failure_class == FailureClass.HANG
    assert (found.rank, found.node) == (1, "n2")
    # Flagged once: a third poll adds no event and asks nothing again.
    _poll(watcher, running, beat)
    assert JobEvent.objects.filter(attempt=running, reason__startswith="Hung: ").count() == 1
    assert len(queued) == 2


def test_rank_labelled_log_lines_count_for_ranks_without_a_heartbeat(running) -> None:
    watcher = ProgressWatcher()
    log = b"[rank0]: step 5, loss=1.0\n[rank1]: step 4, loss=1.1\n[rank999]: step 1\n"
    _poll(watcher, running, {file_key(running.uuid, STDOUT_FILE): log})
    ranks = AttemptProgress.objects.get(attempt=running).ranks
    assert {r: (v["step"], v["source"]) for r, v in ranks.items()} == {
        "0": (5, "log"),
        "1": (4, "log"),
    }


def test_a_huge_job_reads_at_most_max_ranks_records(running) -> None:
    running.job.nodes, running.job.gpus_per_node = 1024, 8
    reads = _poll(ProgressWatcher(), running, {})
    assert len(reads) == MAX_RANKS and all(r.limit == HEARTBEAT_READ for r in reads)


def test_a_polls_new_steps_are_written_in_one_statement_however_many_jobs(
    project: Project, owner: User
) -> None:
    """Rows whose verdict stands get their steps in one write for the poll; the first
    poll makes each row (a save each), the next ones update them all together."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    cluster = factories.cluster()
    attempts = []
    for _ in range(12):
        job, attempt = factories.job(project, owner, cluster, template=Template.TORCHRUN)
        attempt.state, attempt.run_dir, attempt.slurm_job_id = State.RUNNING, "/runs/x", "7"
        attempt.started_at = timezone.now()
        attempt.save()
        attempt.job = job
        attempts.append(attempt)

    def poll(step: int, some: list[Attempt]) -> int:
        watcher = ProgressWatcher()
        watcher.requests(some)
        files = {
            file_key(a.uuid, progress_file(0)): _chunk(_record(0, "n1", step, 0.5, time.time()))
            for a in some
        }
        with CaptureQueriesContext(connection) as captured:
            watcher.ingest(some, AgentReply(time=time.time(), files=files))
        # Each attempt's own transaction is a savepoint inside the test's: no statement
        # reaches the database for it unless it writes.
        return len([q for q in captured if "SAVEPOINT" not in q["sql"]])

    poll(1, attempts)  # the rows are made
    assert poll(2, attempts[:1]) == poll(3, attempts)  # step 2 for one, then 3 for twelve
    stored = AttemptProgress.objects.filter(attempt__in=attempts)
    assert sorted(row.ranks["0"]["step"] for row in stored) == [3] * 12
