"""A trial whose metric goes NaN or infinite, or grows by orders of magnitude over its best,
is pruned as diverged: its job cancelled, its row saying so, never Complete with 1.28e17.

The losses are the issue's diverging trial (a loss falling from 2.3, then 1.6e6, inf,
nan, ending at 1.28e17) and BigDL's logged ImageNet run (intel/ipex-llm#1486: `Loss is
1.2645824`, `Loss is 1.308916`, `Loss is Infinity`).
"""

import math

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from jobs.enums import State
from projects.models import Project
from sweeps.divergence import divergence
from sweeps.models import Sweep, Trial
from sweeps.selectors import best_trial, parallel_coordinates
from sweeps.tick import sweep_advance
from tests.sweeps.helpers import attempt_of, falling, new_sweep, run

pytestmark = pytest.mark.usefixtures("no_submission")

# Steps 1-22 fall from 2.3; then the trial diverges.
ISSUE_TRIAL = {**falling(2.3, 0.02, 22), 23: 1.6e6, 24: math.inf, 25: math.nan, 26: 1.28e17}


def _tick(sweep: Sweep) -> list[Trial]:
    assert sweep_advance(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    return list(sweep.trials.order_by("number"))


def test_a_running_trial_that_diverges_is_pruned_as_diverged_and_cancelled(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    # The median pruner prunes nothing before two trials complete: only divergence can.
    sweep = new_sweep(submitter, project, cluster)
    first, second = _tick(sweep)
    run(first, falling(2.3, 0.02, 20))
    assert _tick(sweep)[0].state == Trial.State.RUNNING
    run(first, {s: v for s, v in ISSUE_TRIAL.items() if s > 20})
    run(second, falling(2.2, 0.01, 30))
    trials = _tick(sweep)
    trial = trials[0]
    assert (trial.state, trial.diverged, trial.state_label) == (
        Trial.State.PRUNED,
        True,
        "Pruned (diverged)",
    )
    assert (
        trial.note == "Diverged at step 23: loss 1.6e+06, orders of magnitude past its best 1.86."
    )
    assert trial.last_step == 20  # the reports before the divergence only
    assert attempt_of(trial).cancel_requested_at is not None
    assert attempt_of(trial).events.filter(reason__contains="Diverged at step 23").exists()
    assert trials[1].state == Trial.State.RUNNING and not trials[1].diverged
    assert len(trials) == 3  # its place taken


def test_a_trial_that_ran_to_its_end_diverged_is_not_listed_complete(
    submitter: User, project: Project, cluster: Cluster, client: Client
) -> None:
    sweep = new_sweep(submitter, project, cluster, pruner=Sweep.Pruner.NONE)
    first, second = _tick(sweep)
    run(first, ISSUE_TRIAL, state=State.COMPLETED)  # the tick sees it only once it ended
    run(second, falling(2.2, 0.01, 100), state=State.COMPLETED)
    trials = _tick(sweep)
    diverged, complete = trials[:2]
    assert (diverged.state, diverged.diverged, diverged.value) == (Trial.State.PRUNED, True, None)
    assert diverged.note.startswith("Diverged at step 23: loss 1.6e+06")
    assert complete.state == Trial.State.COMPLETE and complete.value == pytest.approx(1.2)
    assert best_trial(sweep, trials) == complete
    chart = parallel_coordinates(sweep, trials)
    assert chart["trials"] == [1] and chart["diverged"] == [0]
    assert chart["dimensions"][-1]["values"] == [pytest.approx(1.2)]
    assert all(d.get("tickformat") for d in chart["dimensions"])

    client.force_login(submitter)
    page = client.get(f"/sweeps/{sweep.pk}/").content.decode()
    assert "Pruned (diverged)" in page and "Diverged at step 23" in page
    body = client.get(f"/api/v1/sweeps/{sweep.pk}/").json()
    assert [t["diverged"] for t in body["trials"][:2]] == [True, False]


def test_an_infinity_between_reports_prunes_at_its_own_step(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    first, _ = _tick(sweep)
    run(first, {10: 1.2645824, 11: 1.308916, 12: math.inf, 13: 1.2483193})
    trial = _tick(sweep)[0]
    assert trial.diverged and trial.note == "Diverged at step 12: loss is NaN or infinite."
    assert trial.intermediate == {"10": 1.2645824}


@pytest.mark.parametrize(
    ("history", "points", "maximize", "step"),
    [
        ([2.3, 1.9], [(3, 1.6e6)], False, 3),  # three orders of magnitude past the best
        ([2.3, 1.9], [(3, 2.0e3)], False, None),  # bad, but within the bound
        ([0.5, 0.4], [(3, 3.0), (4, 0.39)], False, None),  # a spike that recovers
        ([], [(1, math.nan)], False, 1),  # the first value already NaN
        ([], [(1, 2.3), (2, -math.inf)], False, 2),
        ([0.1, 0.9], [(3, 0.0)], True, None),  # accuracy back to 0 is no divergence
        ([0.1, 0.9], [(3, -5e3)], True, 3),  # a maximized score to -5e3 is
        ([0.0, 0.0], [(3, 5.0)], False, None),  # no scale yet: nothing to be off by
        ([-3.0, -3.5], [(3, 4e3)], False, 3),  # negative losses (a log-likelihood)
    ],
)
def test_the_divergence_rule(
    history: list[float], points: list[tuple[int, float]], maximize: bool, step: int | None
) -> None:
    found = divergence(history=history, points=points, maximize=maximize)
    assert (found.step if found else None) == step
