"""The trust boundary's pieces: state from the portal account, hints from a user's session."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from clusters.slurm import SacctRow, SqueueRow
from jobs.enums import State
from jobs.models import Attempt, JobEvent
from jobs.poll.authority import VANISH_GRACE, ClusterTruth, Verdict, truth_apply, verdict
from tests import factories

START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
UUID = uuid.UUID("5f0c0d6e-8f8a-4c1e-9a59-0d3c6b1f2a77")
NAME = f"portal-{UUID}"  # the Slurm job name of the `running` attempt
USER = "svc"  # the cluster account it runs as
SUBMITTED = START - timedelta(seconds=30)


def _squeue(job_id: str, state: str, name: str = NAME, user: str = USER) -> SqueueRow:
    return SqueueRow(
        job_id=job_id,
        name=name,
        state=state,
        reason=None,
        node_list="n1",
        start_time=START,
        end_time=None,
        time_limit=timedelta(minutes=10),
        exit_code=None,
        signal=None,
        comment="",
        node_count=1,
        user=user,
        submit_time=SUBMITTED,
    )


def _sacct(
    job_id: str, state: str, *, end: datetime | None, name: str = NAME, user: str = USER
) -> SacctRow:
    return SacctRow(
        job_id=job_id,
        name=name,
        state=state,
        exit_code=0,
        signal=None,
        start_time=START,
        end_time=end,
        elapsed=(end - START) if end else None,
        time_limit=timedelta(minutes=10),
        node_count=1,
        node_list="n1",
        gpus=1,
        comment="",
        user=user,
        submit_time=SUBMITTED,
    )


@pytest.fixture
def running(project, member, cluster: Cluster) -> Attempt:
    """An attempt Slurm job 101 runs, in that state for longer than the vanish grace."""
    _, attempt = factories.job(project, member, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(
        uuid=UUID,
        account=factories.account(cluster, None),
        created_at=START - timedelta(minutes=1),
        state=State.RUNNING,
        slurm_job_id="101",
        state_changed_at=timezone.now() - VANISH_GRACE * 3,
        started_at=START,
        node_list="n1",
    )
    attempt.refresh_from_db()
    return attempt


def test_a_job_in_the_portal_accounts_squeue_stays_as_it_says_whatever_its_exit_file(
    running: Attempt,
) -> None:
    truth = ClusterTruth(queue={"101": _squeue("101", "RUNNING")})
    assert truth_apply([running], truth, {running.pk: 0}) == 0
    running.refresh_from_db()
    assert running.state == State.RUNNING


def test_a_job_gone_from_squeue_but_ended_in_sacct_takes_sacct_state_and_times(
    running: Attempt,
) -> None:
    end = START + timedelta(seconds=100)
    truth = ClusterTruth(history={"101": _sacct("101", "COMPLETED", end=end)}, accounting=True)
    assert truth_apply([running], truth, {}) == 1
    running.refresh_from_db()
    assert (running.state, running.started_at, running.ended_at) == (State.COMPLETED, START, end)
    assert running.exit_code == 0


def test_a_job_gone_from_squeue_still_running_in_sacct_is_left_alone(running: Attempt) -> None:
    truth = ClusterTruth(history={"101": _sacct("101", "RUNNING", end=None)}, accounting=True)
    assert truth_apply([running], truth, {running.pk: 0}) == 0
    running.refresh_from_db()
    assert running.state == State.RUNNING


def test_a_job_in_neither_is_unknown_and_stays_live_while_sacct_answers(
    running: Attempt,
) -> None:
    """Its reservation is only released by a final state: UNKNOWN keeps it."""
    truth = ClusterTruth(accounting=True)
    assert truth_apply([running], truth, {running.pk: 0}) == 1
    running.refresh_from_db()
    assert running.state == State.UNKNOWN and "sacct has no record" in running.reason
    assert truth_apply([running], truth, {running.pk: 0}) == 0  # no event per poll


def test_without_accounting_a_long_vanished_job_ends_by_its_exit_file(running: Attempt) -> None:
    assert truth_apply([running], ClusterTruth(), {running.pk: 3}) == 1
    running.refresh_from_db()
    assert (running.state, running.exit_code) == (State.FAILED, 3)


def test_a_just_changed_job_gets_the_grace_before_it_counts_as_vanished(
    running: Attempt,
) -> None:
    Attempt.objects.filter(pk=running.pk).update(state_changed_at=timezone.now())
    running.refresh_from_db()
    assert truth_apply([running], ClusterTruth(), {running.pk: 0}) == 0


def test_a_cluster_without_a_portal_account_says_so(cluster: Cluster) -> None:
    assert not cluster.has_portal_account
    assert "tamper" in cluster.trust_warning
    cluster.portal_username = "portal-svc"
    cluster.portal_private_key = "key"
    assert cluster.has_portal_account and cluster.trust_warning == ""


# sbatch's answer comes back through the user's session: a forged one (a shell function
# of sbatch's path in ~/.bashrc) can name another user's job, a small one.


def test_an_id_showing_another_users_job_is_replaced_by_the_one_job_of_the_attempts_name(
    running: Attempt,
) -> None:
    shown = _squeue("101", "RUNNING", name="decoy", user="mallory")
    # Another user's job of the attempt's name is no candidate.
    named = [_squeue("107", "RUNNING"), _squeue("109", "RUNNING", user="mallory")]
    decided = verdict(running, shown, named)
    assert decided == Verdict(job_id="107", cancel={})
    truth = ClusterTruth(queue={"101": shown}, verdicts={"101": decided})
    assert truth_apply([running], truth, {}) == 1
    running.refresh_from_db()
    assert (running.slurm_job_id, running.state) == ("107", State.RUNNING)
    event = JobEvent.objects.filter(attempt=running).latest("id")
    assert "Slurm job 101 is mallory's job submitted at 2026-12-01 09:59:30" in event.reason
    assert "following job 107" in event.reason
    # From then on the real job decides.
    ended = _squeue("107", "COMPLETED")
    assert truth_apply([running], ClusterTruth(queue={"107": ended}), {}) == 1
    running.refresh_from_db()
    assert running.state == State.COMPLETED


@pytest.mark.parametrize("named", [[], [_squeue("108", "RUNNING", user="mallory")]])
def test_an_id_showing_another_job_fails_the_attempt_when_no_job_of_its_user_bears_its_name(
    running: Attempt, named: list[SqueueRow]
) -> None:
    shown = _squeue("101", "RUNNING", user="mallory")
    decided = verdict(running, shown, named)
    assert decided == Verdict(job_id=None, cancel={})  # another user's job is never cancelled
    truth = ClusterTruth(queue={"101": shown}, verdicts={"101": decided})
    assert truth_apply([running], truth, {}) == 1
    running.refresh_from_db()
    assert running.state == State.FAILED and running.slurm_job_id == "101"
    assert running.reason.startswith("Slurm job 101 is mallory's job submitted at")
    assert "Slurm shows no job of this attempt's name and user" in running.reason


def test_a_sacct_record_of_another_user_is_not_this_attempts_end(running: Attempt) -> None:
    end = START + timedelta(seconds=100)
    record = _sacct("101", "COMPLETED", end=end, user="mallory")
    assert truth_apply([running], ClusterTruth(history={"101": record}, accounting=True), {}) == 1
    running.refresh_from_db()
    assert running.state == State.FAILED
    assert "is mallory's job" in running.reason
