"""A node dies under a one-node job: the job comes back on the other node, from its checkpoint.

The node's death is real to Slurm: its slurmd is killed (and the job's
slurmstepds and processes with it, as a crash would), so slurmctld marks the
node down after SlurmdTimeout and the job NODE_FAIL. The sandbox is shared:
the node's slurmd is always restarted and the node resumed, whatever happens.
"""

import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from clusters.sandbox import daemons
from clusters.sandbox.config import Paths
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, JobEvent
from jobs.services import job_submit
from monitoring.models import Checkpoint
from tests.factories import spec
from tests.helpers import attempt_processes, run_file, wait_for

# Kills a node's slurmd: no other sandbox test runs meanwhile.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive]

# Long enough (30 s at --sleep 0.25) to be still training when the node is killed. Every
# checkpoint is kept: one counts as complete only once it has been unchanged for a few
# seconds (monitoring.checkpoints.registry), longer than a checkpoint every 2 steps of
# 0.25 s would live under the trainer's own --keep 3.
STEPS = 120


def _slurm(paths: Paths, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv), env=daemons.slurm_env(paths), capture_output=True, text=True, timeout=30
    )


def _kill_job_on_node(attempt: Attempt) -> None:
    """What a dead node leaves: no slurmstepd and no process of the job."""
    prefix = f"slurmstepd: [{attempt.slurm_job_id}.".encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().startswith(prefix):
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue
    for pid, _env in attempt_processes(attempt):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


def test_a_failed_node_is_excluded_and_the_job_resumes_on_the_other(
    celery_worker, researcher, project, sandbox_cluster, example_trainer
) -> None:
    paths = Paths.of(settings.SANDBOX_STATE_DIR)
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="survives a node failure",
            template=Template.TORCHRUN,
            command=f"{example_trainer} --steps {STEPS} --checkpoint-every 2 --keep {STEPS} "
            "--sleep 0.25",
            nodes=1,
            gpus_per_node=1,
            max_restarts=1,
            exclude_failed_nodes=True,
        ),
    )
    first = Attempt.objects.get(job=job, number=1)
    wait_for(
        lambda: Checkpoint.objects.filter(attempt=first, complete=True, step__gte=2).exists(),
        120,
        "a checkpoint in the registry",
    )
    first.refresh_from_db()
    node = first.node_list
    assert re.fullmatch(r"n\d", node), node
    others = _slurm(paths, "squeue", "-h", "-w", node, "-o", "%i").stdout.split()
    if set(others) - {first.slurm_job_id}:
        # Killing the node would fail someone else's jobs on the shared sandbox.
        _slurm(paths, "scancel", first.slurm_job_id)
        pytest.skip(f"other jobs run on {node} ({', '.join(others)}); not killing it")

    slurmd = next(d for d in daemons.daemons(paths) if d.name == f"slurmd {node}")
    pid = daemons.running_pid(slurmd)
    assert pid is not None
    try:
        os.kill(pid, signal.SIGKILL)
        _kill_job_on_node(first)
        wait_for(
            lambda: Attempt.objects.filter(pk=first.pk, state=State.NODE_FAIL).exists(),
            120,
            f"Slurm to declare {node} failed",
        )
    finally:
        if daemons.running_pid(slurmd) is None:
            daemons.start(slurmd, paths)
        # ReturnToService=2 brings it back on its own; resuming is harmless if it did.
        _slurm(paths, "scontrol", "update", f"nodename={node}", "state=resume")

    wait_for(
        lambda: Attempt.objects.filter(
            job=job, number=2, state__in=[State.COMPLETED, State.FAILED], files_complete=True
        ).exists(),
        180,
        "attempt 2 to finish",
    )
    first.refresh_from_db()
    second = Attempt.objects.get(job=job, number=2)
    log2 = run_file(second, "stdout.log")
    assert second.state == State.COMPLETED, log2[-3000:]
    assert first.failure_class == FailureClass.NODE_FAILURE
    assert first.diagnosis is not None and first.diagnosis["node"] == node

    # Excluded, so it ran on the other node; resumed from the last checkpoint it had.
    assert second.excluded_nodes == node
    assert second.node_list not in ("", node)
    assert f"#SBATCH --exclude={node}" in run_file(second, "job.sbatch")
    latest = Checkpoint.objects.filter(attempt=first, complete=True).order_by("-step").first()
    assert latest is not None and latest.step is not None
    assert second.resume_from == f"{first.run_dir}/checkpoints/step-{latest.step}.pt"
    first_step = int(re.findall(r"^step (\d+), loss=", log2, re.M)[0])
    assert first_step == latest.step + 1
    assert f"done at step {STEPS}" in log2
    restart = JobEvent.objects.get(attempt=second, to_state=State.QUEUED)
    assert f"after Node failure on attempt 1: resuming from step {latest.step}" in restart.reason
    assert f"without node {node}" in restart.reason
