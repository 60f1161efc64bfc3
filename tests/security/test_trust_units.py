"""The trust boundary's pieces: state from the portal account, hints from a user's session."""

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from clusters.slurm import SacctRow, SqueueRow
from jobs.authority import VANISH_GRACE, ClusterTruth, truth_apply
from jobs.models import Attempt, State
from tests import factories

START = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def _squeue(job_id: str, state: str) -> SqueueRow:
    return SqueueRow(
        job_id=job_id,
        name="portal-x",
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
    )


def _sacct(job_id: str, state: str, *, end: datetime | None) -> SacctRow:
    return SacctRow(
        job_id=job_id,
        name="portal-x",
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
    )


@pytest.fixture
def running(project, member, cluster: Cluster) -> Attempt:
    """An attempt Slurm job 101 runs, in that state for longer than the vanish grace."""
    _, attempt = factories.job(project, member, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(
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
