"""Reads for the sweep pages: the trials, the best one, and the parallel-coordinates data."""

import math
from typing import Any
from urllib.parse import urlencode

from django.db.models import Count, Q, QuerySet
from django.urls import reverse
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from monitoring.runs.compare import MAX_RUNS
from projects.models import Project
from sweeps.models import Sweep, Trial
from sweeps.space import SpaceError, distributions

# d3's format for the numeric axes: 3 significant digits, 1.28e+17 rather than Plotly's
# default SI-and-power ticks (`1.2x10<sup>17</sup>` printed raw on parallel axes).
TICK_FORMAT = ".3~g"


def sweeps_of_project(*, project: Project) -> QuerySet[Sweep]:
    """The project's sweeps with their trials counted by state: one query."""
    return (
        Sweep.objects.filter(project=project)
        .select_related("user")
        .annotate(
            trial_count=Count("trials"),
            running_count=Count("trials", filter=Q(trials__state=Trial.State.RUNNING)),
            pruned_count=Count("trials", filter=Q(trials__state=Trial.State.PRUNED)),
        )
        .order_by("-created_at", "-id")
    )


def sweep_trials(*, sweep: Sweep) -> list[Trial]:
    return list(sweep.trials.select_related("job").order_by("number"))


def trial_score(trial: Trial) -> float | None:
    """The value a trial is judged by: its final value, or its last reported one if pruned;
    None for a diverged one (its values say nothing about its settings but that)."""
    if trial.state == Trial.State.COMPLETE:
        return trial.value
    if trial.state == Trial.State.PRUNED and trial.intermediate and not trial.diverged:
        return float(trial.intermediate[str(trial.last_step)])
    return None


def best_trial(sweep: Sweep, trials: list[Trial]) -> Trial | None:
    """The complete trial with the best value in the sweep's direction."""
    done = [t for t in trials if t.state == Trial.State.COMPLETE and t.value is not None]
    if not done:
        return None
    sign = -1.0 if sweep.direction == Sweep.Direction.MAXIMIZE else 1.0
    return min(done, key=lambda t: (sign * (t.value or 0.0), t.number))


def compare_url(sweep: Sweep, trials: list[Trial]) -> str:
    """The compare page with the trials' runs on the sweep's metric; "" when none has a job.

    At most the compare page's MAX_RUNS: the best scored first, then the newest others.
    """
    sign = -1.0 if sweep.direction == Sweep.Direction.MAXIMIZE else 1.0
    with_jobs = [t for t in trials if t.job_id is not None]
    scored = [
        (sign * score, t.number, t) for t in with_jobs if (score := trial_score(t)) is not None
    ]
    rest = sorted((t for t in with_jobs if trial_score(t) is None), key=lambda t: -t.number)
    chosen = [t for *_, t in sorted(scored, key=lambda row: row[:2])] + rest
    if not chosen:
        return ""
    query = urlencode(
        {"runs": ",".join(str(t.job_id) for t in chosen[:MAX_RUNS]), "metric": sweep.metric}
    )
    return f"{reverse('project-compare', args=[sweep.project.slug])}?{query}"


def _axis(name: str, dist: Any, trials: list[Trial]) -> dict[str, Any]:
    values = [t.params.get(name) for t in trials]
    if isinstance(dist, CategoricalDistribution):
        choices = list(dist.choices)
        return {
            "label": name,
            "values": [choices.index(v) if v in choices else None for v in values],
            "tickvals": list(range(len(choices))),
            "ticktext": [str(c) for c in choices],
        }
    if isinstance(dist, FloatDistribution | IntDistribution) and dist.log:
        # Plotly's parallel axes are linear: a log-scaled setting goes on as log10.
        return {
            "label": f"log10({name})",
            "values": [
                math.log10(v) if isinstance(v, int | float) and v > 0 else None for v in values
            ],
            "tickformat": TICK_FORMAT,
        }
    return {"label": name, "values": values, "tickformat": TICK_FORMAT}


def parallel_coordinates(sweep: Sweep, trials: list[Trial]) -> dict[str, Any]:
    """One line per trial with a value (complete, or pruned at its last report)."""
    scored = [(t, trial_score(t)) for t in trials]
    shown = [t for t, score in scored if score is not None]
    scores = [score for _, score in scored if score is not None]
    try:
        dists = distributions(sweep.space)
    except SpaceError:
        dists = {}
    axes = [_axis(name, dist, shown) for name, dist in dists.items()]
    if any(t.nodes != sweep.nodes for t in trials):
        nodes = [t.nodes for t in shown]
        counts = sorted(set(nodes))  # whole numbers only: a 1-to-2 axis printed 1, 1, 2, 2
        axes.append(
            {
                "label": "nodes",
                "values": nodes,
                "tickvals": counts,
                "ticktext": counts,
                "tickformat": "d",
            }
        )
    axes.append({"label": sweep.metric, "values": scores, "tickformat": TICK_FORMAT})
    return {
        "dimensions": axes,
        "color": scores,
        "trials": [t.number for t in shown],
        "pruned": [t.state == Trial.State.PRUNED for t in shown],
        "diverged": [t.number for t in trials if t.diverged],
        "reversescale": sweep.direction == Sweep.Direction.MINIMIZE,
    }
