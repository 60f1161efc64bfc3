"""The Optuna study of a sweep, rebuilt from its rows on every tick.

Optuna keeps nothing between ticks: the trials' settings, reported values, states and
Optuna's own per-trial attributes (a grid point, the halving rungs) live in `Trial`
rows, and the study is made again in memory from them. That is what lets a restarted
portal, or another worker, carry on.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.pruners import BasePruner, MedianPruner, NopPruner, SuccessiveHalvingPruner
from optuna.samplers import BaseSampler, RandomSampler, TPESampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState, create_trial

from sweeps.models import Sweep, Trial
from sweeps.space import NODES_KEY, Choice, distributions, first_trials_checked, grid_points

optuna.logging.set_verbosity(optuna.logging.WARNING)

# Seeds are spread apart per trial number, so a study rebuilt for trial n draws anew.
_SEED_STRIDE = 100_003

_STATES = {
    Trial.State.RUNNING: TrialState.RUNNING,
    Trial.State.COMPLETE: TrialState.COMPLETE,
    Trial.State.PRUNED: TrialState.PRUNED,
    Trial.State.FAILED: TrialState.FAIL,
    Trial.State.STOPPED: TrialState.FAIL,
}


def sampler_for(sweep: Sweep, number: int) -> BaseSampler:
    seed = (sweep.seed * _SEED_STRIDE + number) % 2**32
    if sweep.sampler in (Sweep.Sampler.GRID, Sweep.Sampler.RANDOM):
        # A grid's points are chosen by `suggest`, in order; the sampler only ever sees them fixed.
        return RandomSampler(seed=seed)
    return TPESampler(seed=seed, n_startup_trials=max(sweep.startup_trials, 2))


def pruner_for(sweep: Sweep) -> BasePruner:
    if sweep.pruner == Sweep.Pruner.MEDIAN:
        return MedianPruner(
            n_startup_trials=sweep.startup_trials, n_warmup_steps=sweep.warmup_steps
        )
    if sweep.pruner == Sweep.Pruner.HALVING:
        return SuccessiveHalvingPruner(min_resource=sweep.warmup_steps, reduction_factor=3)
    return NopPruner()


def intermediate_of(trial: Trial) -> dict[int, float]:
    return {int(step): float(value) for step, value in (trial.intermediate or {}).items()}


def _frozen(sweep: Sweep, trial: Trial) -> FrozenTrial:
    dists = distributions(sweep.space)
    complete = trial.state == Trial.State.COMPLETE
    return create_trial(
        state=_STATES[Trial.State(trial.state)],
        value=trial.value if complete else None,
        params={name: trial.params[name] for name in dists},
        distributions=dists,
        system_attrs=dict(trial.system_attrs or {}),
        intermediate_values=intermediate_of(trial),
    )


def study_from(sweep: Sweep, trials: Iterable[Trial], *, number: int = 0) -> optuna.Study:
    """An in-memory study holding the sweep's trials in number order (trial n is trials[n])."""
    direction = (
        StudyDirection.MAXIMIZE if sweep.direction == "maximize" else StudyDirection.MINIMIZE
    )
    study = optuna.create_study(
        direction=direction, sampler=sampler_for(sweep, number), pruner=pruner_for(sweep)
    )
    for trial in sorted(trials, key=lambda t: t.number):
        study.add_trial(_frozen(sweep, trial))
    return study


@dataclass(frozen=True)
class Suggestion:
    params: dict[str, Choice]
    nodes: int
    system_attrs: dict[str, Any]


def suggest(sweep: Sweep, trials: list[Trial]) -> Suggestion:
    """The next trial's settings: the next first trial if any is left, else the next grid
    point not run yet, else the sampler's."""
    number = len(trials)
    study = study_from(sweep, trials, number=number)
    dists = distributions(sweep.space)
    firsts = first_trials_checked(sweep.first_trials, dists)
    nodes = sweep.nodes
    if number < len(firsts):
        fixed = dict(firsts[number])
        nodes = int(fixed.pop(NODES_KEY, nodes))
        study.enqueue_trial(fixed)
    elif sweep.sampler == Sweep.Sampler.GRID:
        tried = [{name: t.params.get(name) for name in dists} for t in trials]
        # Not run yet, or every point has been: the grid's size caps max_trials.
        fresh = [p for p in grid_points(dists) if p not in tried]
        study.enqueue_trial(fresh[0] if fresh else grid_points(dists)[0])
    asked = study.ask(dists)
    frozen = study.trials[asked.number]
    return Suggestion(
        params=dict(asked.params), nodes=nodes, system_attrs=dict(frozen.system_attrs)
    )


@dataclass(frozen=True)
class Pruning:
    pruned: bool
    step: int | None  # the step the decision was made at
    system_attrs: dict[str, Any]


def prune_check(sweep: Sweep, trials: list[Trial], trial: Trial, new: dict[int, float]) -> Pruning:
    """Report the trial's new values in step order, asking the pruner after each."""
    study = study_from(sweep, trials)
    frozen = study.trials[trial.number]
    # A study made afresh numbers its trials' ids from 0 in the order they were added.
    live = optuna.trial.Trial(study, frozen._trial_id)
    for step in sorted(new):
        live.report(new[step], step)
        if live.should_prune():
            attrs = study.trials[trial.number].system_attrs
            return Pruning(pruned=True, step=step, system_attrs=dict(attrs))
    return Pruning(
        pruned=False, step=None, system_attrs=dict(study.trials[trial.number].system_attrs)
    )
