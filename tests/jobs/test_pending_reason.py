"""Slurm's pending reason: kept on the attempt from the portal account's squeue, while it waits.

Rows come from verbatim squeue output of the sandbox (tests/clusters/fixtures/slurm,
squeue_mixed.txt: job 14 held by its user, 17 waiting for resources, 16 running).
"""

import dataclasses
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.models import Cluster
from clusters.slurm import parse_squeue
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.authority import ClusterTruth, truth_apply
from tests import factories
from tests.clusters.slurm_output import SQUEUE_FIELDS_2026_12_01, by_id, fixture

ROWS = by_id(parse_squeue(fixture("squeue_mixed.txt"), fields=SQUEUE_FIELDS_2026_12_01))


@pytest.fixture
def pending(project, member, cluster: Cluster) -> Attempt:
    _, attempt = factories.job(project, member, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING, state_changed_at=timezone.now() - timedelta(minutes=5)
    )
    attempt.refresh_from_db()
    return attempt


def _poll(attempt: Attempt, row_id: str) -> Attempt:
    Attempt.objects.filter(pk=attempt.pk).update(slurm_job_id=row_id)
    attempt.refresh_from_db()
    row = dataclasses.replace(ROWS[row_id], name=attempt.slurm_job_name)  # the attempt's job
    truth_apply([attempt], ClusterTruth(queue={row_id: row}), {})
    attempt.refresh_from_db()
    return attempt


def test_a_pending_attempt_keeps_slurms_reason_and_follows_its_changes(pending: Attempt) -> None:
    events = pending.events.count()
    assert _poll(pending, "17").slurm_reason == "Resources"
    # Still pending, for another reason: the reason follows, no state event is made.
    assert _poll(pending, "14").slurm_reason == "JobHeldUser"
    assert pending.state == State.PENDING
    assert pending.events.count() == events


def test_the_reason_is_cleared_once_the_job_runs(pending: Attempt) -> None:
    _poll(pending, "17")
    running = _poll(pending, "16")
    assert running.state == State.RUNNING
    assert running.slurm_reason == ""
