"""Hangs on the sandbox: a stopped rank is caught and named, and the job resumes without its node;
a long declared checkpoint and slow but regular steps are not taken for a hang.

The example trainer calls portal_metrics.heartbeat every step and wraps its
checkpoints in portal_metrics.pause; the batch script's sitecustomize installs
the stack-dump hook. The hung job is the 2-node DDP example (1 GPU a node): the
sandbox's third node lets its second attempt run on two nodes without the culprit's.
"""

import contextlib
import os
import re
import signal
import time

import pytest
from django.test import Client

from clusters.slurm.hostlist import expand_nodes
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_submit
from monitoring.models import AttemptProgress, Checkpoint, EfficiencyCard
from tests.factories import spec
from tests.fixtures.servers import POLL_INTERVAL
from tests.helpers import (
    QUEUE_WAIT,
    attempt_processes,
    card_against_ledger,
    run_file,
    step_reached_at,
    wait_for,
)

# Its waits add up past the default 300 s when the machine is busy (a queue, a 15 s floor,
# the stacks, a second attempt).
pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900)]

# Long enough that the job still runs when a checkpoint has settled (5 s unchanged) and the
# test stops a rank, however loaded the machine: the trainer keeps every checkpoint.
STEPS = 150


def _rank_process(attempt: Attempt, rank: int) -> tuple[int, str]:
    workers = [
        (pid, env) for pid, env in attempt_processes(attempt) if env.get("RANK") == str(rank)
    ]
    assert workers, f"no process of rank {rank} for attempt {attempt.pk}"
    pid, env = min(workers)  # the worker itself, not a process it forked
    return pid, env["SLURMD_NODENAME"]


def test_a_stopped_rank_is_named_with_stacks_and_the_job_resumes_without_its_node(
    celery_worker, researcher, project, sandbox_cluster, example_trainer
) -> None:
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="hangs when a rank stops",
            template=Template.TORCHRUN,
            command=f"{example_trainer} --steps {STEPS} --checkpoint-every 4 --keep {STEPS} "
            "--sleep 0.3",
            nodes=2,
            gpus_per_node=1,
            max_restarts=1,
            restart_on=(FailureClass.HANG,),
            # A short floor, so that the test is quick: 3 x 0.3 s steps is under it.
            hang_floor_seconds=15,
            hang_multiple=3.0,
        ),
    )
    first = Attempt.objects.get(job=job, number=1)
    wait_for(  # the job asks for two nodes: it may queue behind others' jobs
        lambda: Checkpoint.objects.filter(attempt=first, complete=True, step__gte=8).exists(),
        QUEUE_WAIT,
        "a checkpoint at step 8 or later",
    )
    pid, node = _rank_process(first, rank=1)
    os.kill(pid, signal.SIGSTOP)
    try:
        _caught_and_resumed(job, first, node, stopped_at=time.time())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)  # whatever happened, leave no stopped process
    # The job page shows the culprit and the stacks side by side.
    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="hang-1"' in page and f'data-culprit-node="{node}"' in page
    assert 'class="hang-stack" data-rank="0"' in page and "ddp_train.py" in page
    assert 'class="hang-stack" data-rank="1"' in page  # the culprit's place, dump or not
    _card_splits_the_ledger(first)


def _caught_and_resumed(job: Job, first: Attempt, node: str, *, stopped_at: float) -> None:
    # Flagged within 120 s of the last step (the floor is 15 s), the culprit named.
    wait_for(
        lambda: AttemptProgress.objects.filter(attempt=first, verdict="hang").exists(),
        120,
        "attempt 1 to be flagged as hung",
    )
    progress = AttemptProgress.objects.get(attempt=first)
    assert (progress.culprit_rank, progress.culprit_node) == (1, node), progress.why
    last_step_at = max(r["step_at"] for r in progress.ranks.values() if r["step_at"])
    assert last_step_at <= stopped_at + 1
    assert f"Rank 1 on node {node} stopped first" in progress.why
    # The live rank's stack comes in (the stopped one cannot answer until it is continued).
    wait_for(
        lambda: "0" in AttemptProgress.objects.get(attempt=first).stacks,
        60,
        "rank 0's stack dump",
    )
    stack = AttemptProgress.objects.get(attempt=first).stacks["0"]
    # Rank 0 waits for rank 1 in the step's collective, inside the trainer's main().
    assert "most recent call first" in stack and "ddp_train.py" in stack, stack[:2000]

    # The restart policy cancels it, and attempt 2 resumes from the checkpoint on two
    # nodes without the culprit's (it may queue for them behind others' jobs).
    wait_for(
        lambda: Attempt.objects.filter(
            job=job, number=2, state__in=[State.COMPLETED, State.FAILED], files_complete=True
        ).exists(),
        QUEUE_WAIT,
        "attempt 2 to finish",
    )
    first.refresh_from_db()
    second = Attempt.objects.get(job=job, number=2)
    log2 = run_file(second, "stdout.log")
    assert second.state == State.COMPLETED, log2[-3000:]
    assert first.state == State.CANCELLED
    assert first.failure_class == FailureClass.HANG, first.diagnosis
    assert first.diagnosis is not None
    assert (first.diagnosis["rank"], first.diagnosis["node"]) == (1, node)
    assert second.excluded_nodes == node
    assert f"#SBATCH --exclude={node}" in run_file(second, "job.sbatch")
    ran_on = expand_nodes(second.node_list)
    assert len(ran_on) == 2 and node not in ran_on, second.node_list
    latest = Checkpoint.objects.filter(attempt=first, complete=True).order_by("-step").first()
    assert latest is not None and latest.step is not None
    assert second.resume_from == f"{first.run_dir}/checkpoints/step-{latest.step}.pt"
    first_step = int(re.findall(r"^step (\d+), loss=", log2, re.M)[0])
    assert first_step == latest.step + 1
    restart = JobEvent.objects.get(attempt=second, to_state=State.QUEUED)
    assert f"after {FailureClass.HANG.label}" in restart.reason
    assert f"without node {node}" in restart.reason


def test_a_long_declared_checkpoint_and_slow_regular_steps_are_not_a_hang(
    celery_worker, researcher, project, sandbox_cluster, example_trainer
) -> None:
    common = {
        "template": Template.TORCHRUN,
        "nodes": 1,
        "gpus_per_node": 1,
        "hang_floor_seconds": 10,
        "hang_multiple": 3.0,
    }
    paused = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="pauses in a declared checkpoint",
            # Each checkpoint takes 25 s more, well past the 10 s floor, inside pause().
            command=f"{example_trainer} --steps 6 --checkpoint-every 3 --checkpoint-pause 25 "
            "--sleep 0.2",
            **common,
        ),
    )
    slow = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="slow but regular steps",
            command=f"{example_trainer} --steps 4 --checkpoint-every 0 --sleep 14",
            **common,
        ),
    )
    jobs = [paused, slow]
    wait_for(
        lambda: all(
            Attempt.objects.filter(job=j, state__in=[State.COMPLETED, State.FAILED]).exists()
            for j in jobs
        ),
        240,
        "both jobs to finish",
    )
    for job in jobs:
        attempt = Attempt.objects.get(job=job, number=1)
        assert attempt.state == State.COMPLETED, run_file(attempt, "stdout.log")[-2000:]
        assert Attempt.objects.filter(job=job).count() == 1
        progress = AttemptProgress.objects.get(attempt=attempt)
        assert progress.verdict == "" and progress.flagged_at is None, progress.why
        assert not JobEvent.objects.filter(job=job, reason__startswith="Hung").exists()
        # The poll did follow its rank: it saw steps, so "not flagged" means something.
        assert progress.ranks["0"]["source"] == "heartbeat"
        assert progress.ranks["0"]["step"] is not None and progress.ranks["0"]["step"] >= 3
    # The slow job's own pace set its limit: three of its 14 s steps, above the floor.
    slow_progress = AttemptProgress.objects.get(attempt__job=slow)
    assert slow_progress.threshold_seconds is not None and slow_progress.threshold_seconds > 30
    assert Job.objects.get(pk=paused.pk).state == State.COMPLETED
    # Its card counts both declared checkpoints (25 s each, at steps 3 and 6), not only the
    # last one the progress row saw; a little less if the ledger's charge is a bit shorter.
    attempt = Attempt.objects.get(job=paused, number=1)
    wait_for(lambda: EfficiencyCard.objects.filter(attempt=attempt).exists(), 60, "the paused card")
    card = EfficiencyCard.objects.get(attempt=attempt)
    declared = card.data["parts"]["declared_pauses"] * 3600  # one GPU: GPU-seconds are seconds
    assert 0.95 * 2 * 25 <= declared < 2 * 25 + 15, card.data


def _card_splits_the_ledger(first: Attempt) -> None:
    """Attempt 1's card: its parts sum to the ledger's GPU-hours; "lost" is the work attempt 2
    redid, from the resumed step to the hang (its last step), and "hung" the rest."""
    card, charge = card_against_ledger(first)
    gpus = first.job.total_gpus
    resumed = card["resumed_step"]
    # When rank 0 reached the resumed step, by its own clock (metrics.jsonl), and the last
    # step any rank made before the hang, as the detector saw it. Slurm's cancel sends
    # SIGCONT before SIGTERM: the stopped rank finishes its step and the trainer saves a
    # checkpoint as it stops, so attempt 2 may resume from the very step of the hang and
    # redo nothing; or the kill comes first, and it redoes the steps since the last one.
    reached = step_reached_at(first, resumed)
    progress = AttemptProgress.objects.get(attempt=first)
    last_step_at = max(r["step_at"] for r in progress.ranks.values() if r["step_at"])
    lost_seconds = card["parts"]["lost"] * 3600 / gpus
    expected_lost = max(last_step_at - reached, 0.0)
    assert abs(lost_seconds - expected_lost) <= POLL_INTERVAL, (lost_seconds, expected_lost, card)
    hung_seconds = card["parts"]["hung"] * 3600 / gpus
    # Never below 0, as the card's parts: sacct's end is in whole seconds, and a rank let go
    # by the cancel's SIGCONT makes its step right at the end (one CI run: -1.06 s).
    expected_hung = max(charge.ended_at.timestamp() - last_step_at, 0.0)
    assert abs(hung_seconds - expected_hung) <= POLL_INTERVAL, (hung_seconds, card)
