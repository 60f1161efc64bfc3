"""Writes on sweeps: create one (checked whole, budget included), pause, resume, stop."""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone
from optuna.distributions import CategoricalDistribution

from clusters.inventory import cluster_partitions
from jobs.access import require_submitter
from jobs.enums import FINAL_STATES
from jobs.models import Attempt
from jobs.services import attempt_cancel_by_portal, submit_account
from jobs.specs import JobSpec, code_of, validate_spec
from projects.models import Quota
from sweeps.access import require_steerer
from sweeps.budget import budget_check, resume_budget_check, trial_nodes
from sweeps.errors import SweepError
from sweeps.models import Sweep, Trial
from sweeps.space import (
    Choice,
    SpaceError,
    command_for,
    command_problem,
    distributions,
    first_trials_checked,
    grid_size,
)


def trial_spec(sweep: Sweep, *, number: int, params: dict[str, Choice], nodes: int) -> JobSpec:
    """The job of one trial: the sweep's spec, the settings in its command and parameter table."""
    return JobSpec(
        name=f"{sweep.name} trial {number}"[:128],
        template=sweep.template,
        command=command_for(sweep.command, params),
        nodes=nodes,
        gpus_per_node=sweep.gpus_per_node,
        cpus_per_task=sweep.cpus_per_task,
        memory_mb=sweep.memory_mb,
        time_limit=sweep.time_limit,
        partition=sweep.partition,
        setup=sweep.setup,
        params=dict(params),
        **code_of(sweep),
    )


def _space_errors(sweep: Sweep) -> tuple[list[dict[str, Choice]], dict[str, list[str]]]:
    try:
        dists = distributions(sweep.space)
    except SpaceError as exc:
        return [], {"space": [str(exc)]}
    errors: dict[str, list[str]] = {}
    firsts: list[dict[str, Choice]] = []
    try:
        firsts = first_trials_checked(sweep.first_trials, dists)
    except SpaceError as exc:
        errors["first_trials"] = [str(exc)]
    if problem := command_problem(sweep.command, dists):
        errors["command"] = [problem]
    if sweep.sampler == Sweep.Sampler.GRID:
        try:
            size = grid_size(dists)
        except SpaceError as exc:
            errors["sampler"] = [str(exc)]
        else:
            if sweep.max_trials > size:
                errors["max_trials"] = [f"The grid has {size} points: run at most {size} trials."]
    return firsts, errors


def _sample_params(sweep: Sweep, firsts: list[dict[str, Choice]]) -> dict[str, Choice]:
    """Settings to check the trials' spec with (the command's length, its flags)."""
    if firsts:
        return {k: v for k, v in firsts[0].items() if k in sweep.space}
    sample: dict[str, Choice] = {}
    for name, dist in distributions(sweep.space).items():
        if isinstance(dist, CategoricalDistribution):
            sample[name] = dist.choices[0]  # type: ignore[assignment]
        else:
            sample[name] = dist.high  # type: ignore[attr-defined]
    return sample


def sweep_create(*, user: User, sweep: Sweep) -> Sweep:
    """Check the unsaved sweep whole (search, trials' spec, budget) and save it, or refuse."""
    project, cluster = sweep.project, sweep.cluster
    require_submitter(user=user, project=project)
    sweep.user = user
    account = submit_account(user=user, cluster=cluster)
    if sweep.max_concurrent < 1 or sweep.max_trials < 1:
        raise SweepError("Run at least one trial, at least one at a time.")
    firsts, errors = _space_errors(sweep)
    if errors:
        raise SweepError("The sweep cannot start as it is.", errors=errors)
    quota = Quota.objects.filter(project=project).first()
    partitions = cluster_partitions(cluster=cluster, account=account)
    biggest = max(trial_nodes(sweep, firsts))
    spec = trial_spec(sweep, number=0, params=_sample_params(sweep, firsts), nodes=biggest)
    errors = validate_spec(spec=spec, partitions=partitions, quota=quota)
    if errors:
        raise SweepError("The sweep's trials cannot be submitted as they are.", errors=errors)
    budget_check(sweep, firsts)
    sweep.state = Sweep.State.RUNNING
    sweep.save()
    return sweep


def _set_state(sweep: Sweep, *, frm: tuple[str, ...], to: str) -> None:
    with transaction.atomic():
        changed = Sweep.objects.filter(pk=sweep.pk, state__in=frm).update(state=to)
    if not changed:
        raise SweepError(f"The sweep is {sweep.get_state_display().lower()}: nothing to do.")
    sweep.state = to


def sweep_pause(*, user: User, sweep: Sweep) -> None:
    """Start no new trial; running ones go on (and are still pruned)."""
    require_steerer(user=user, sweep=sweep)
    _set_state(sweep, frm=(Sweep.State.RUNNING,), to=Sweep.State.PAUSED)


def sweep_resume(*, user: User, sweep: Sweep) -> None:
    """Start trials again, if the ones still to run fit the budget left (it may have shrunk)."""
    require_steerer(user=user, sweep=sweep)
    if sweep.state == Sweep.State.PAUSED:
        firsts, _ = _space_errors(sweep)
        resume_budget_check(sweep, firsts, started=sweep.trials.count())
    _set_state(sweep, frm=(Sweep.State.PAUSED,), to=Sweep.State.RUNNING)


def sweep_stop(*, user: User, sweep: Sweep) -> None:
    """No new trials, and every running one cancelled."""
    require_steerer(user=user, sweep=sweep)
    with transaction.atomic():
        _set_state(sweep, frm=(Sweep.State.RUNNING, Sweep.State.PAUSED), to=Sweep.State.STOPPED)
        for trial in sweep.trials.filter(state=Trial.State.RUNNING).select_related("job"):
            _trial_end(trial, reason=f"Sweep {sweep.name} stopped by {user.get_username()}.")


def trial_stop(*, user: User, trial: Trial) -> None:
    """Cancel one running trial; the sweep goes on with the others."""
    require_steerer(user=user, sweep=trial.sweep)
    with transaction.atomic():
        locked = (
            Trial.objects.select_for_update(of=("self",)).select_related("job").get(pk=trial.pk)
        )
        if locked.state != Trial.State.RUNNING:
            raise SweepError(f"Trial {trial.number} is {locked.get_state_display().lower()}.")
        _trial_end(locked, reason=f"Trial stopped by {user.get_username()}.")
    trial.state = Trial.State.STOPPED


def _trial_end(trial: Trial, *, reason: str, state: str = Trial.State.STOPPED) -> None:
    trial.state = state
    trial.note = reason[:300]
    trial.ended_at = timezone.now()
    trial.save(update_fields=["state", "note", "ended_at"])
    if trial.job is not None:
        trial_job_cancel(trial, reason=reason)


def trial_job_cancel(trial: Trial, *, reason: str) -> None:
    """Cancel the live attempt of the trial's job (scancel now, GPUs free on the next poll)."""
    if trial.job_id is None:
        return
    live = (
        Attempt.objects.filter(job_id=trial.job_id)
        .exclude(state__in=FINAL_STATES)
        .order_by("-number")
        .first()
    )
    if live is not None:
        attempt_cancel_by_portal(attempt=live, reason=reason)
