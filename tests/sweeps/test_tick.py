"""The tick: trials start up to the cap, losers are pruned and cancelled, ended trials are
recorded, and every decision lives in the rows, so a tick after a crash duplicates nothing."""

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt, Job
from portal_lib.errors import PortalError
from projects.models import Project
from sweeps import tick as tick_module
from sweeps.errors import SweepError
from sweeps.models import Sweep, Trial
from sweeps.services import sweep_pause, sweep_resume, sweep_stop, trial_stop
from sweeps.tick import sweep_advance
from tests.sweeps.helpers import attempt_of, falling, new_sweep, run

pytestmark = pytest.mark.usefixtures("no_submission")


def _tick(sweep: Sweep) -> list[Trial]:
    assert sweep_advance(sweep_id=sweep.pk)
    sweep.refresh_from_db()
    return list(sweep.trials.order_by("number"))


def test_trials_start_up_to_the_cap_as_jobs_with_their_settings(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster, max_concurrent=3)
    trials = _tick(sweep)
    assert [t.number for t in trials] == [0, 1, 2]
    for trial in trials:
        assert trial.job_id is not None
        job = Job.objects.get(pk=trial.job_id)
        lr = trial.params["lr"]
        assert 1e-5 <= lr <= 0.3
        assert job.command == f"python train.py --steps 100 --lr {lr}"
        assert job.params["lr"] == lr and job.name == f"lr search trial {trial.number}"
        assert attempt_of(trial).state == State.QUEUED
    assert len({t.params["lr"] for t in trials}) == 3  # each trial draws anew
    assert len(_tick(sweep)) == 3  # the cap holds while they run


def test_a_loser_is_pruned_and_cancelled_and_its_place_taken(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    first, second = _tick(sweep)
    run(first, falling(2.0, 0.01, 100), state=State.COMPLETED)
    run(second, falling(2.2, 0.01, 100), state=State.COMPLETED)
    trials = _tick(sweep)
    assert [t.state for t in trials[:2]] == [Trial.State.COMPLETE] * 2
    assert trials[0].value == pytest.approx(1.0) and trials[1].value == pytest.approx(1.2)
    assert trials[0].intermediate["50"] == pytest.approx(1.5)
    third, fourth = trials[2:]
    # The third learns nothing; the fourth does as well as the best.
    run(third, {step: 2.5 for step in range(1, 25)})
    run(fourth, falling(2.0, 0.01, 25))
    trials = _tick(sweep)
    assert trials[2].state == Trial.State.PRUNED
    assert trials[2].note == "Pruned at step 10: loss 2.5."
    assert trials[3].state == Trial.State.RUNNING and trials[3].last_step == 20
    pruned = attempt_of(trials[2])
    assert pruned.cancel_requested_at is not None  # scancel queued; the poll frees the GPUs
    assert pruned.events.filter(reason__startswith="Pruned by sweep lr search").exists()
    assert [t.number for t in trials] == [0, 1, 2, 3, 4]  # its place taken at once


def _two_complete(sweep: Sweep) -> tuple[Trial, Trial]:
    """Two good trials completed (the median pruner's start-up), two more started."""
    first, second = _tick(sweep)
    run(first, falling(2.0, 0.01, 100), state=State.COMPLETED)
    run(second, falling(2.2, 0.01, 100), state=State.COMPLETED)
    third, fourth = _tick(sweep)[2:]
    return third, fourth


@pytest.mark.parametrize(
    ("state", "until"),
    [
        # The poll read the last step (the command's --steps 100) before Slurm said it ended.
        (State.RUNNING, 100),
        # It left RUNNING (its processes ended, short of --steps) before the tick saw its values.
        (State.COMPLETING, 40),
    ],
)
def test_a_loser_that_reached_its_last_step_or_finished_completes_unpruned(
    submitter: User, project: Project, cluster: Cluster, state: str, until: int
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    third, _ = _two_complete(sweep)
    attempt = run(third, {step: 2.5 for step in range(1, until + 1)}, state=state)
    trial = _tick(sweep)[2]
    assert trial.state == Trial.State.RUNNING, trial.note
    assert trial.last_step == until and trial.note == ""
    assert Attempt.objects.get(pk=attempt.pk).cancel_requested_at is None
    run(third, {}, state=State.COMPLETED)
    trial = _tick(sweep)[2]
    assert trial.state == Trial.State.COMPLETE and trial.value == 2.5


def test_a_pruned_trial_whose_job_completed_before_the_cancel_completes(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    # No --steps: the portal cannot tell the job's last step, so it prunes at step 10.
    sweep = new_sweep(
        submitter, project, cluster, command="python train.py --lr {lr}", max_trials=4
    )
    third, fourth = _two_complete(sweep)
    run(third, {step: 2.5 for step in range(1, 21)})
    run(fourth, {step: 2.6 for step in range(1, 21)})
    trials = _tick(sweep)
    assert [t.state for t in trials[2:]] == [Trial.State.PRUNED] * 2
    # The third's job had logged its last step: it completed before the scancel came.
    run(third, {step: 2.5 for step in range(21, 31)}, state=State.COMPLETED)
    assert _tick(sweep)[2].state == Trial.State.COMPLETE
    # The fourth's cancel is still on its way: the sweep waits for that end.
    assert sweep.state == Sweep.State.RUNNING
    run(fourth, {}, state=State.CANCELLED)
    trials = _tick(sweep)
    assert sweep.state == Sweep.State.DONE
    third, fourth = trials[2:]
    assert third.value == 2.5 and third.last_step == 30
    assert third.note == "Its job completed before the pruning could stop it."
    assert fourth.state == Trial.State.PRUNED and fourth.note == "Pruned at step 10: loss 2.6."


def test_successive_halving_keeps_the_best_third(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster, pruner=Sweep.Pruner.HALVING, max_concurrent=3)
    trials = _tick(sweep)
    run(trials[0], falling(2.0, 0.02, 12))
    run(trials[1], falling(2.0, 0.01, 12))
    run(trials[2], falling(2.0, 0.001, 12))
    states = [t.state for t in _tick(sweep)[:3]]
    # At the first rung (step 10) the best goes on; worse than the best third are pruned.
    assert states[0] == Trial.State.RUNNING
    assert states.count(Trial.State.PRUNED) >= 1 and states[2] == Trial.State.PRUNED
    kept = Trial.objects.get(sweep=sweep, number=0)
    assert kept.system_attrs == {"completed_rung_0": pytest.approx(1.8)}


def test_a_crash_mid_tick_leaves_nothing_and_the_next_tick_starts_over(
    submitter: User, project: Project, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = new_sweep(submitter, project, cluster, max_concurrent=3)
    real = tick_module.job_submit
    calls: list[int] = []

    def dies_on_the_second(**kwargs: object) -> Job:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("worker killed")
        return real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(tick_module, "job_submit", dies_on_the_second)
    with pytest.raises(RuntimeError):
        sweep_advance(sweep_id=sweep.pk)
    assert not Trial.objects.exists() and not Job.objects.exists()
    monkeypatch.setattr(tick_module, "job_submit", real)
    # A fresh tick (a new worker: nothing in memory) starts them once.
    first = _tick(Sweep.objects.get(pk=sweep.pk))
    again = _tick(Sweep.objects.get(pk=sweep.pk))
    assert [t.pk for t in first] == [t.pk for t in again] and len(first) == 3
    assert Job.objects.count() == 3 and Attempt.objects.count() == 3


def test_a_trial_over_the_projects_concurrency_limit_waits_in_its_line(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster, max_concurrent=3)
    project.quota.max_concurrent_gpus = 2
    project.quota.save()
    trials = _tick(sweep)
    assert len(trials) == 3
    assert [attempt_of(trial).state for trial in trials] == [
        State.QUEUED,
        State.QUEUED,
        State.WAITING,
    ]


def test_a_quota_refusal_waits_for_the_next_tick_and_says_why(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster, max_concurrent=3)
    project.quota.max_concurrent_gpus = 0
    project.quota.save()
    assert _tick(sweep) == []
    assert sweep.message.startswith("Trial 0 could not start: needs 1 GPUs, more than the 0")


def test_pause_resume_stop_and_stopping_one_trial(
    submitter: User, owner: User, member: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    first, second = _tick(sweep)
    run(first, falling(2.0, 0.01, 5))
    run(second, falling(2.0, 0.01, 5))
    sweep_pause(user=owner, sweep=sweep)
    trial_stop(user=submitter, trial=first)
    assert len(_tick(sweep)) == 2  # paused: nothing new
    assert Trial.objects.get(pk=first.pk).state == Trial.State.STOPPED
    assert attempt_of(first).cancel_requested_at is not None
    with pytest.raises(SweepError):
        sweep_pause(user=submitter, sweep=sweep)
    sweep_resume(user=submitter, sweep=sweep)
    assert len(_tick(sweep)) == 3
    sweep_stop(user=submitter, sweep=sweep)
    assert set(sweep.trials.values_list("state", flat=True)) == {Trial.State.STOPPED}
    assert not sweep_advance(sweep_id=sweep.pk)  # a stopped sweep is left alone


def test_only_the_submitter_or_an_owner_steers(
    submitter: User, viewer: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    with pytest.raises(PortalError):
        sweep_pause(user=viewer, sweep=sweep)
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.RUNNING


def test_a_sweep_is_done_when_its_last_trial_ends(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster, max_trials=2)
    first, second = _tick(sweep)
    run(first, falling(2.0, 0.01, 100), state=State.COMPLETED)
    run(second, falling(2.0, 0.01, 3), state=State.FAILED)
    trials = _tick(sweep)
    assert sweep.state == Sweep.State.DONE
    assert trials[1].state == Trial.State.FAILED and trials[1].note == "The job ended failed."


def test_a_grid_runs_every_point_once_its_first_trials_included(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    grid = {"lr": [0.1, 0.01, 0.001, 0.0001]}
    sweep = new_sweep(
        submitter,
        project,
        cluster,
        sampler=Sweep.Sampler.GRID,
        space=grid,
        max_trials=4,
        max_concurrent=4,
        first_trials=[{"lr": 0.001, "nodes": 2}],
    )
    trials = _tick(sweep)
    # The first trial first, then the grid in order, skipping what it covered.
    assert [t.params["lr"] for t in trials] == [0.001, 0.1, 0.01, 0.0001]
    assert [t.nodes for t in trials] == [2, 1, 1, 1]


@pytest.mark.django_db(transaction=True)
def test_a_sweep_another_worker_is_ticking_is_passed_by(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    held, done = threading.Event(), threading.Event()

    def other_worker() -> None:
        try:
            with transaction.atomic():
                Sweep.objects.select_for_update().get(pk=sweep.pk)
                held.set()
                done.wait(30)
        finally:
            connection.close()

    thread = threading.Thread(target=other_worker)
    thread.start()
    try:
        assert held.wait(30)
        assert sweep.pk is not None and not sweep_advance(sweep_id=sweep.pk)
        assert not Trial.objects.exists()  # nothing started twice
    finally:
        done.set()
        thread.join()
    assert len(_tick(sweep)) == 2


def test_a_trial_whose_job_was_deleted_fails_and_the_sweep_goes_on(
    submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    first, _ = _tick(sweep)
    assert first.job_id is not None
    Job.objects.filter(pk=first.job_id).delete()
    trials = _tick(sweep)
    assert trials[0].state == Trial.State.FAILED and trials[0].note == "Its job was deleted."
    assert len(trials) == 3
