import pytest

from jobs.enums import State
from jobs.models import Attempt, JobEvent
from jobs.states import IllegalTransition, attempt_transition, can_transition
from tests import factories


@pytest.mark.parametrize(
    ("current", "new", "allowed"),
    [
        (State.QUEUED, State.SUBMITTING, True),
        (State.QUEUED, State.RUNNING, False),
        (State.SUBMITTING, State.RUNNING, True),  # adopted after a lost sbatch reply
        (State.PENDING, State.RUNNING, True),
        (State.RUNNING, State.PENDING, True),  # requeued after a node failure
        (State.RUNNING, State.UNKNOWN, True),
        (State.UNKNOWN, State.RUNNING, True),
        (State.UNKNOWN, State.COMPLETED, True),
        (State.UNKNOWN, State.QUEUED, False),
        (State.COMPLETED, State.RUNNING, False),
        (State.CANCELLED, State.COMPLETED, False),
        (State.FAILED, State.UNKNOWN, False),
    ],
)
def test_transition_table(current: str, new: str, allowed: bool) -> None:
    assert can_transition(current, new) is allowed


def test_transition_records_event_and_moves_the_job(member, project, db) -> None:
    job, attempt = factories.job(project, member, factories.cluster())
    assert attempt_transition(attempt=attempt, to=State.SUBMITTING, reason="go")
    assert attempt_transition(attempt=attempt, to=State.PENDING, reason="sbatch", slurm_job_id="7")
    attempt.refresh_from_db()
    job.refresh_from_db()
    assert (attempt.state, attempt.slurm_job_id, job.state) == (State.PENDING, "7", State.PENDING)
    events = list(JobEvent.objects.filter(job=job).values_list("from_state", "to_state", "reason"))
    assert events == [
        (State.QUEUED, State.SUBMITTING, "go"),
        (State.SUBMITTING, State.PENDING, "sbatch"),
    ]


def test_illegal_transition_is_refused_and_writes_nothing(member, project, db) -> None:
    _, attempt = factories.job(project, member, factories.cluster())
    with pytest.raises(IllegalTransition):
        attempt_transition(attempt=attempt, to=State.COMPLETED)
    assert Attempt.objects.get(pk=attempt.pk).state == State.QUEUED
    assert not JobEvent.objects.exists()


def test_a_stale_view_loses_the_race(member, project, db) -> None:
    _, attempt = factories.job(project, member, factories.cluster())
    stale = Attempt.objects.get(pk=attempt.pk)
    assert attempt_transition(attempt=attempt, to=State.SUBMITTING)
    assert attempt_transition(attempt=stale, to=State.SUBMITTING) is False
    assert JobEvent.objects.count() == 1


def test_an_older_attempt_does_not_move_the_job(member, project, db) -> None:
    job, first = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=first.pk).update(state=State.RUNNING)
    first.state = State.RUNNING
    Attempt.objects.create(job=job, number=2, state=State.QUEUED)
    job.state = State.QUEUED
    job.save()
    attempt_transition(attempt=first, to=State.FAILED)
    job.refresh_from_db()
    assert job.state == State.QUEUED


def test_a_transition_is_all_or_nothing(member, project, db, monkeypatch) -> None:
    # The attempt, its event, the job's state and the settlement commit together: a
    # reader never sees a finished attempt under a job that still shows it running,
    # and a settlement that fails leaves the attempt as it was.
    job, attempt = factories.job(project, member, factories.cluster())
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING)
    attempt.state = State.RUNNING

    def fail(**_: object) -> None:
        raise RuntimeError("the settlement failed")

    monkeypatch.setattr("jobs.states.attempt_settle", fail)
    with pytest.raises(RuntimeError):
        attempt_transition(attempt=attempt, to=State.COMPLETED, exit_code=0)
    assert Attempt.objects.get(pk=attempt.pk).state == State.RUNNING
    assert not JobEvent.objects.filter(to_state=State.COMPLETED).exists()
    job.refresh_from_db()
    assert job.state == State.QUEUED


def test_an_attempt_that_ends_without_a_slurm_job_has_nothing_left_to_read(
    member, project, db
) -> None:
    _, never = factories.job(project, member, factories.cluster())
    attempt_transition(attempt=never, to=State.CANCELLED, reason="cancelled while queued")
    assert Attempt.objects.get(pk=never.pk).files_complete
    # One that Slurm ran is read to its end by the polls first.
    _, ran = factories.job(project, member, never.job.cluster)
    Attempt.objects.filter(pk=ran.pk).update(state=State.RUNNING, slurm_job_id="41")
    ran.refresh_from_db()
    attempt_transition(attempt=ran, to=State.COMPLETED, exit_code=0)
    assert not Attempt.objects.get(pk=ran.pk).files_complete
