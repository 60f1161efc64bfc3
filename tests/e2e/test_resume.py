"""Automatic resume on the sandbox: a 2-node DDP job loses a rank and comes back from its checkpoint.

One job shows two things while it runs: its throttled node is flagged as a
straggler (with the node's name, and a drain button for staff), then a rank is
killed and the portal diagnoses it, restarts from the latest checkpoint, and
the job completes with its step count continuing from there.
"""

import os
import re
import signal

import pytest
from django.contrib.auth.models import User
from django.test import Client

from jobs.enums import FailureClass, State
from jobs.models import Attempt, Job, JobEvent
from monitoring.hangs.stragglers import STEP_RATE, attempt_stragglers
from monitoring.models import Checkpoint
from monitoring.series.read import series_read
from tests.helpers import (
    QUEUE_WAIT,
    attempt_processes,
    card_against_ledger,
    run_file,
    step_reached_at,
    submit_ddp_example,
    wait_for,
)

# Two attempts of the 2-node example: 177-242 s under load, then the teardown's flush.
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(600)]

# Long enough that the job is still running when a loaded machine's test gets to its kill.
STEPS = 60


def kill_rank(attempt: Attempt, rank: int) -> str:
    """SIGKILL one training process (a torchrun worker); returns its node."""
    workers = [
        (pid, env) for pid, env in attempt_processes(attempt) if env.get("RANK") == str(rank)
    ]
    assert workers, f"no process of rank {rank} for attempt {attempt.pk}"
    pid, env = workers[0]
    os.kill(pid, signal.SIGKILL)
    return env["SLURMD_NODENAME"]


def test_a_killed_rank_resumes_from_the_latest_checkpoint(
    celery_worker, researcher, project, sandbox_cluster, alice, staff: User, settings
) -> None:
    # A short window, so a few steps of a slow node are a sustained gap.
    settings.STRAGGLER_POLICY = {"window_steps": 6, "min_points": 5}
    job = submit_ddp_example(
        alice,
        researcher,
        project,
        sandbox_cluster,
        name="resume after a rank dies",
        # Rank 1's node, whichever two of the sandbox's nodes the job gets: three times
        # the others' step time however loaded the machine (at 1.1 s of compute a step
        # under CI's load, a fixed 0.4 s more was not slow enough to flag), up to step 30,
        # so that attempt 2 does not crawl all the way.
        args=f"--steps {STEPS} --checkpoint-every 12 --sleep 0.02 --throttle-rank 1 "
        "--throttle-seconds 0.4 --throttle-factor 3 --throttle-until 30",
    )
    Job.objects.filter(pk=job.pk).update(max_restarts=2)  # read when the failure is decided
    first = Attempt.objects.get(job=job, number=1)
    wait_for(
        lambda: any(env.get("RANK") == "1" for _, env in attempt_processes(first)),
        QUEUE_WAIT,
        "rank 1 to run",
    )
    slow = next(e for _, e in attempt_processes(first) if e.get("RANK") == "1")["SLURMD_NODENAME"]

    # 1. While it runs, the slow node is flagged as a straggler, by name, on the job page.
    def slow_flagged() -> bool:
        attempt = Attempt.objects.select_related("job").get(pk=first.pk)
        return any(
            s.kind == STEP_RATE and s.node == slow for s in attempt_stragglers(attempt=attempt)
        )

    wait_for(slow_flagged, 120, f"node {slow} to be flagged as a straggler while the job runs")
    flagged = attempt_stragglers(attempt=Attempt.objects.select_related("job").get(pk=first.pk))
    assert all(s.node == slow for s in flagged if s.kind == STEP_RATE)
    staff_client = Client()
    staff_client.force_login(staff)
    member_client = Client()
    member_client.force_login(researcher)
    pages: list[tuple[str, str]] = []

    def pages_flag_slow() -> bool:
        # Live: the pages read the findings as the poll left them a moment ago. The finding
        # is a window of recent steps, so on a loaded machine it can drop for a while: both
        # pages are read together, and the wait goes on until both show it.
        staff_page = staff_client.get(f"/jobs/{job.pk}/").content.decode()
        member_page = member_client.get(f"/jobs/{job.pk}/").content.decode()
        pages.append((staff_page, member_page))
        return all(f'data-node="{slow}"' in page for page in pages[-1])

    wait_for(pages_flag_slow, 180, f"the job page to show node {slow} as a straggler")
    page, member_page = pages[-1]
    assert "Stragglers and sick nodes" in page
    assert f"/clusters/{sandbox_cluster.name}/nodes/{slow}/drain/" in page
    assert "/drain/" not in member_page  # the drain button is for staff only

    # 2. Once the checkpoint at step 12 is registered and four more steps are done (work
    # attempt 2 will redo: the card's "lost" part), one rank is killed.
    wait_for(
        lambda: Checkpoint.objects.filter(attempt=first, complete=True, step__gte=12).exists(),
        60,
        "a checkpoint at step 12 or later in the registry",
    )
    wait_for(
        lambda: (series_read(attempt_id=first.pk, name="loss").xs or [0.0])[-1] >= 16,
        60,
        "step 16 of attempt 1, four steps past its checkpoint",
    )
    node = kill_rank(first, rank=1)

    # 3. The portal classifies it and restarts; attempt 2 runs to the end.
    wait_for(
        lambda: (
            Attempt.objects.filter(
                job=job, number=2, state=State.COMPLETED, files_complete=True
            ).exists()
            or Attempt.objects.filter(job=job, number=2, state__in=[State.FAILED]).exists()
        ),
        240,
        "attempt 2 to finish",
    )
    first.refresh_from_db()
    second = Attempt.objects.get(job=job, number=2)
    log1, log2 = run_file(first, "stdout.log"), run_file(second, "stdout.log")
    assert second.state == State.COMPLETED, log2[-3000:]
    assert first.state == State.FAILED
    assert first.failure_class == FailureClass.RANK_CRASH, (first.diagnosis, log1[-3000:])
    assert first.diagnosis is not None
    assert first.diagnosis["rank"] == 1 and first.diagnosis["node"] == node

    latest = Checkpoint.objects.filter(attempt=first, complete=True).order_by("-step").first()
    assert latest is not None and latest.step is not None and latest.step >= 8
    resumed = latest.step
    assert second.resume_from == f"{first.run_dir}/checkpoints/step-{resumed}.pt"
    assert f"resumed from {second.resume_from} at step {resumed}" in log2
    first_step = int(re.findall(r"^step (\d+), loss=", log2, re.M)[0])
    assert first_step == resumed + 1  # continues from the checkpoint, not from 0
    assert f"done at step {STEPS}" in log2
    loss = series_read(attempt_id=second.pk, name="loss")
    assert loss.xs[0] == resumed + 1 and loss.xs[-1] == STEPS

    # 4. The timeline says why attempt 2 exists.
    job.refresh_from_db()
    assert job.state == State.COMPLETED
    restart = JobEvent.objects.get(attempt=second, to_state=State.QUEUED)
    assert "Restart 1/2 after A rank crashed on attempt 1" in restart.reason
    assert f"from step {resumed}" in restart.reason
    page = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Restart 1/2 after A rank crashed" in page
    assert "Attempt 1: A rank crashed" in page

    # 5. Attempt 1's efficiency card: its parts sum to the ledger's GPU-hours, and "lost" is
    # the work attempt 2 redid, from the resumed step to the failure.
    card, charge = card_against_ledger(first)
    assert card["resumed_step"] == resumed
    # When the trainer reached the resumed step, by its own clock (rank 0's metrics.jsonl),
    # and the failure as Slurm's accounting ended the attempt.
    reached = step_reached_at(first, resumed)
    expected = charge.ended_at.timestamp() - reached
    lost_seconds = card["parts"]["lost"] * 3600 / job.total_gpus
    assert expected >= 0.5, (expected, card)  # four steps and the dying, sacct's whole seconds
    assert abs(lost_seconds - expected) <= settings.POLL_INTERVAL, (lost_seconds, expected)
    assert card["parts"]["startup"] > 0 and card["parts"]["productive"] > 0
    assert len(card["per_gpu"]) == job.total_gpus
    page = member_client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="efficiency-1"' in page and f"resumed from step {resumed}" in page
