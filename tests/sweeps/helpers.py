"""Sweeps made the way the form makes them, and trials' jobs moved along as a poll would."""

from datetime import timedelta

from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.series.write import series_append
from projects.models import Project
from sweeps.models import Sweep, Trial
from sweeps.services import sweep_create

LRS = [0.1, 0.03, 0.01, 0.003, 0.001, 0.0003, 0.0001, 0.00003]


def new_sweep(user: User, project: Project, cluster: Cluster, **overrides: object) -> Sweep:
    values: dict[str, object] = {
        "name": "lr search",
        "command": "python train.py --steps 100 --lr {lr}",
        "nodes": 1,
        "gpus_per_node": 1,
        "time_limit": timedelta(minutes=30),
        "partition": "gpu",
        "space": {"lr": {"type": "float", "low": 1e-5, "high": 0.3, "log": True}},
        "sampler": Sweep.Sampler.RANDOM,
        "pruner": Sweep.Pruner.MEDIAN,
        "report_every": 10,
        "warmup_steps": 10,
        "startup_trials": 2,
        "max_trials": 8,
        "max_concurrent": 2,
    }
    values.update(overrides)
    return sweep_create(
        user=user,
        sweep=Sweep(project=project, cluster=cluster, **values),
    )


def attempt_of(trial: Trial) -> Attempt:
    assert trial.job_id is not None
    return Attempt.objects.filter(job_id=trial.job_id).order_by("-number").get()


def run(trial: Trial, losses: dict[int, float], *, state: str = State.RUNNING) -> Attempt:
    """The trial's attempt in `state` (with a Slurm id), having logged these losses by step."""
    attempt = attempt_of(trial)
    attempt.state = state
    attempt.slurm_job_id = str(1000 + trial.pk)
    attempt.files_complete = state in (State.COMPLETED, State.FAILED, State.CANCELLED)
    attempt.save()
    Job.objects.filter(pk=attempt.job_id).update(state=state)  # the job shows its attempt's
    series_append(points=[(attempt.pk, "loss", float(s), v) for s, v in losses.items()])
    return attempt


def falling(start: float, per_step: float, until: int) -> dict[int, float]:
    return {step: start - per_step * step for step in range(1, until + 1)}
