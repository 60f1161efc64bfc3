"""A sweep of the example trainer over the learning rate on the sandbox.

Eight trials as ordinary jobs, the second on 2 nodes, at most three at once: the two good
learning rates run first, the others are far too small and the median pruner stops them
early; each pruned trial's attempt is cancelled and its GPUs are free on the next poll.
The Celery worker (with beat, which ticks the sweep) is killed mid-sweep and started again:
no trial is lost or made twice. A sweep the budget cannot hold is refused first, before
any trial starts.
"""

import time
from datetime import timedelta

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from clusters.ssh import Connection
from jobs.enums import FINAL_STATES, State, Template
from jobs.models import Attempt, Job
from projects.models import Project, Reservation
from sweeps.errors import SweepError
from sweeps.models import Sweep, Trial
from sweeps.services import sweep_create
from tests.fixtures.servers import POLL_INTERVAL
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(600)]

STEPS = 40


def _sweep(
    researcher: User, project: Project, cluster: Cluster, trainer: str, **kw: object
) -> Sweep:
    values: dict[str, object] = {
        "name": "lr sweep",
        "template": Template.TORCHRUN,
        "command": f"{trainer} --steps {STEPS} --sleep 0.3 --checkpoint-every 0 --lr {{lr}}",
        "nodes": 1,
        "gpus_per_node": 1,
        "cpus_per_task": 1,
        "time_limit": timedelta(minutes=10),
        # Two good rates, run first (the second on 2 nodes); the others far too small to
        # learn in 40 steps (the example's loss: ~0.15 against ~0.7 at step 10).
        "space": {"lr": [0.05, 0.02, 1e-5, 7e-6, 5e-6, 3e-6, 2e-6, 1e-6]},
        "first_trials": [{"lr": 0.05}, {"lr": 0.02, "nodes": 2}],
        "sampler": Sweep.Sampler.GRID,
        "pruner": Sweep.Pruner.MEDIAN,
        "report_every": 5,
        "warmup_steps": 10,
        "startup_trials": 2,
        "max_trials": 8,
        "max_concurrent": 3,
    }
    values.update(kw)
    return sweep_create(user=researcher, sweep=Sweep(project=project, cluster=cluster, **values))


def _report(trial: Trial, attempt: Attempt) -> None:
    """How long after the pruning Slurm left RUNNING (the scancel seen) and the job ended."""
    assert trial.ended_at is not None
    left = attempt.events.filter(to_state__in=[State.COMPLETING, State.CANCELLED]).order_by("time")
    first = left.first()
    assert first is not None
    print(
        f"trial {trial.number}: pruned at step {trial.last_step}; Slurm left RUNNING "
        f"{(first.time - trial.ended_at).total_seconds():.1f} s later, the job ended "
        f"{(attempt.state_changed_at - trial.ended_at).total_seconds():.1f} s later"
    )


def _freed(attempt_id: int) -> bool:
    attempt = Attempt.objects.get(pk=attempt_id)
    released = (
        Reservation.objects.filter(attempt_id=attempt_id, released_at__isnull=False).exists()
        or Reservation.objects.filter(attempt_id=attempt_id, ended_at__isnull=False).exists()
    )
    return attempt.state in FINAL_STATES and released


def test_a_sweep_prunes_losers_frees_their_gpus_and_survives_a_worker_restart(
    celery_worker,
    researcher: User,
    project: Project,
    sandbox_cluster: Cluster,
    alice: Connection,
    example_trainer: str,
) -> None:
    # 1. A sweep over the budget is refused whole: nothing recorded, no job.
    with pytest.raises(SweepError) as refused:
        _sweep(
            researcher,
            project,
            sandbox_cluster,
            example_trainer,
            space={"lr": {"type": "float", "low": 1e-6, "high": 0.1, "log": True}},
            sampler=Sweep.Sampler.RANDOM,
            max_trials=1000,
            time_limit=timedelta(hours=12),
            max_concurrent=3,
        )
    assert "lower the number of trials" in refused.value.message
    assert not Sweep.objects.exists() and not Job.objects.filter(project=project).exists()

    sweep = _sweep(researcher, project, sandbox_cluster, example_trainer)

    # 2. Mid-sweep (the first trial has completed, not all have started), the worker and
    # its beat are killed with SIGKILL, then started again.
    wait_for(
        lambda: Trial.objects.filter(sweep=sweep, state=Trial.State.COMPLETE).exists(),
        QUEUE_WAIT,
        "a first trial to complete",
    )
    before = Trial.objects.filter(sweep=sweep).count()
    assert before < 8
    celery_worker.kill()
    try:
        time.sleep(3 * POLL_INTERVAL)  # the trials' jobs go on in Slurm meanwhile
    finally:
        celery_worker.start()

    # 3. The sweep carries on to its end.
    wait_for(
        lambda: Sweep.objects.get(pk=sweep.pk).state == Sweep.State.DONE,
        QUEUE_WAIT * 2,
        "the sweep to finish its eight trials",
    )
    trials = list(Trial.objects.filter(sweep=sweep).select_related("job").order_by("number"))
    states = [t.state for t in trials]
    print(f"sweep states: {states}; {before} trials before the worker was killed")
    # Nothing lost or made twice: eight trials, one job each, one attempt each.
    assert [t.number for t in trials] == list(range(8))
    assert Job.objects.filter(project=project).count() == 8
    assert {t.job_id for t in trials} == set(
        Job.objects.filter(project=project).values_list("pk", flat=True)
    )
    assert all(Attempt.objects.filter(job__sweep_trial=t).count() == 1 for t in trials)
    # The good rates completed, the 2-node one on 2 nodes; at least two others were pruned.
    assert states[0] == states[1] == Trial.State.COMPLETE
    assert trials[1].nodes == 2 and trials[1].job is not None and trials[1].job.nodes == 2
    pruned = [t for t in trials if t.state == Trial.State.PRUNED]
    assert len(pruned) >= 2, states
    # Each pruned trial's job is cancelled and its GPUs and reservation freed.
    attempts = {t.number: Attempt.objects.get(job__sweep_trial=t) for t in pruned}
    wait_for(
        lambda: all(_freed(a.pk) for a in attempts.values()),
        60,
        "the pruned trials' jobs to end and free their GPUs",
    )
    for trial in pruned:
        attempt = Attempt.objects.get(pk=attempts[trial.number].pk)
        assert trial.last_step is not None and trial.last_step < STEPS  # stopped early
        assert attempt.state == State.CANCELLED, attempt.state
        assert attempt.cancel_requested_at is not None and trial.ended_at is not None
        assert not alice.run(f"squeue -h -j {attempt.slurm_job_id}").text.strip()
        _report(trial, attempt)
    best = min((t for t in trials if t.value is not None), key=lambda t: t.value or 0.0)
    assert best.number in (0, 1)
