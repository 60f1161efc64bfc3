"""Queue insight for a pending job: Slurm's start estimate and how long similar jobs waited.

Squeue rows are verbatim sandbox output (tests/clusters/fixtures/slurm,
squeue_start_estimate.txt: 809 waits on Resources behind 808, estimated for 21:05:13).
The wait history is recorded attempts with chosen submit and start times.
"""

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings

from clusters.models import Cluster, ClusterAccount
from clusters.slurm import parse_squeue
from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.start_estimates import ESTIMATE_KEY, estimates_due, record_estimates
from jobs.queue.waits import MAX_WAIT_SAMPLES, format_wait, percentile, similar_waits
from monitoring.job_page.header import expected_start_text, header_facts
from tests import factories
from tests.clusters.slurm_output import SQUEUE_FIELDS_2026_12_01, at, by_id, fixture

ROWS = by_id(parse_squeue(fixture("squeue_start_estimate.txt"), fields=SQUEUE_FIELDS_2026_12_01))
NOW = datetime(2026, 12, 1, 21, 0, tzinfo=UTC)


def _as(attempt: Attempt, row_id: str, **changed: object) -> dict:
    """The fixture row as the attempt's own job: its account's, submitted after it was made."""
    job = attempt.job
    account = ClusterAccount.objects.filter(cluster=job.cluster, user=job.user).first()
    Attempt.objects.filter(pk=attempt.pk).update(
        slurm_job_id=row_id,
        state=State.PENDING,
        account=account or factories.account(job.cluster, job.user),
    )
    attempt.refresh_from_db()
    assert attempt.account is not None
    own = {"user": attempt.account.username, "submit_time": attempt.created_at}
    return {row_id: dataclasses.replace(ROWS[row_id], **{**own, **changed})}


def test_a_pending_attempt_stores_slurms_estimate(project, member, cluster: Cluster) -> None:
    _, attempt = factories.job(project, member, cluster)
    assert record_estimates([attempt], _as(attempt, "809")) == 1
    attempt.refresh_from_db()
    assert attempt.expected_start_at == at(21, 5, 13)
    assert record_estimates([attempt], _as(attempt, "809")) == 0  # unchanged: no write


def test_no_estimate_from_a_running_row_or_another_users_job(project, member, cluster) -> None:
    _, running = factories.job(project, member, cluster)
    _, other = factories.job(project, member, cluster)
    queue = _as(running, "808")
    queue |= _as(other, "809", user="mallory")  # the id came back for someone else's job
    assert record_estimates([running, other], queue) == 0
    Attempt.objects.filter(pk=other.pk).update(slurm_job_id="810")
    other.refresh_from_db()
    queue["810"] = ROWS["809"]  # as the fixture has it: submitted days before the attempt
    assert record_estimates([running, other], queue) == 0
    assert not Attempt.objects.filter(expected_start_at__isnull=False).exists()


def test_a_job_its_tenant_renamed_still_has_its_estimate(project, member, cluster) -> None:
    _, attempt = factories.job(project, member, cluster)
    assert record_estimates([attempt], _as(attempt, "809", name="innocent")) == 1


def test_an_estimate_slurm_withdraws_is_cleared(project, member, cluster) -> None:
    _, attempt = factories.job(project, member, cluster)
    queue = _as(attempt, "809")
    record_estimates([attempt], queue)
    na = {"809": dataclasses.replace(queue["809"], start_time=None)}  # squeue: N/A
    assert record_estimates([attempt], na) == 1
    attempt.refresh_from_db()
    assert attempt.expected_start_at is None


@override_settings(QUEUE_ESTIMATE_INTERVAL=180)
def test_estimates_are_read_at_most_once_per_interval_per_cluster() -> None:
    cache.delete_many([ESTIMATE_KEY.format(cluster_id=n) for n in (1, 2)])
    assert estimates_due(cluster_id=1) and estimates_due(cluster_id=2)
    assert not estimates_due(cluster_id=1) and not estimates_due(cluster_id=2)
    cache.delete(ESTIMATE_KEY.format(cluster_id=1))  # the interval ran out
    assert estimates_due(cluster_id=1)


def _started(project, user, cluster, *, wait_min: float, ago: timedelta, **spec) -> None:
    values = {"partition": "gpu", "nodes": 2, "gpus_per_node": 4, **spec}
    _, attempt = factories.job(project, user, cluster, **values)
    submitted = NOW - ago
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.COMPLETED,
        submitted_at=submitted,
        started_at=submitted + timedelta(minutes=wait_min),
    )


@pytest.fixture
def history(project, member, cluster: Cluster) -> Cluster:
    """Ten similar jobs waiting 1..10 min, and jobs that must not count."""
    for minutes in range(1, 11):
        _started(project, member, cluster, wait_min=minutes, ago=timedelta(days=minutes))
    _started(project, member, cluster, wait_min=600, ago=timedelta(days=29))  # too old
    _started(project, member, cluster, wait_min=600, ago=timedelta(hours=1), partition="cpu")
    _started(project, member, cluster, wait_min=600, ago=timedelta(hours=1), nodes=1)
    _started(project, member, cluster, wait_min=600, ago=timedelta(hours=1), gpus_per_node=8)
    other = factories.cluster(name="other")
    _started(project, member, other, wait_min=600, ago=timedelta(hours=1))
    _, waiting = factories.job(project, member, cluster, partition="gpu", nodes=2, gpus_per_node=4)
    Attempt.objects.filter(pk=waiting.pk).update(state=State.PENDING, submitted_at=NOW)
    return cluster


def test_similar_waits_gives_median_and_p90_of_the_matching_history(history: Cluster) -> None:
    waits = similar_waits(cluster_id=history.pk, partition="gpu", nodes=2, gpus_per_node=4, now=NOW)
    # 1..10 min: median 5.5 min; p90 at rank 8.1 of 0..9 -> 9.1 min (percentile_cont).
    assert (waits.count, waits.median, waits.p90) == (
        10,
        timedelta(minutes=5.5),
        timedelta(minutes=9.1),
    )
    assert waits.text == (
        "similar jobs (2 nodes x 4 GPUs on gpu) waited 6 min median, 9 min p90 over 10 jobs"
    )


def test_similar_waits_says_when_there_are_too_few(history: Cluster) -> None:
    waits = similar_waits(cluster_id=history.pk, partition="gpu", nodes=1, gpus_per_node=4, now=NOW)
    assert (waits.count, waits.median) == (1, None)
    assert waits.text == (
        "similar jobs (1 node x 4 GPUs on gpu): only 1 in the last 4 weeks, too few to tell"
    )


def test_similar_waits_reads_a_bounded_sample(history: Cluster, django_assert_num_queries) -> None:
    with django_assert_num_queries(1):
        similar_waits(cluster_id=history.pk, partition="gpu", nodes=2, gpus_per_node=4, now=NOW)
    assert MAX_WAIT_SAMPLES == 500


def test_percentile_interpolates_like_percentile_cont() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.9) == pytest.approx(3.7)
    assert percentile([7.0], 0.9) == 7.0


def test_the_header_of_a_pending_job_shows_estimate_and_history(history: Cluster) -> None:
    attempt = Attempt.objects.get(state=State.PENDING)
    attempt.expected_start_at = NOW + timedelta(minutes=12, seconds=10)
    facts = header_facts(job=attempt.job, attempts=[attempt], now=NOW)
    assert facts.expected_start == (
        "expected to start in about 12 min (Slurm's own, uncorrected: no past estimates here yet)"
    )
    assert facts.similar_waits.startswith("similar jobs (2 nodes x 4 GPUs on gpu) waited 6 min")

    attempt.state = State.RUNNING
    facts = header_facts(job=attempt.job, attempts=[attempt], now=NOW)
    assert (facts.expected_start, facts.similar_waits) == ("", "")


def test_expected_start_words() -> None:
    assert expected_start_text(None, NOW) == "no estimate yet"
    assert expected_start_text(NOW + timedelta(hours=3, minutes=5), NOW) == (
        "expected to start in about 3 h 5 min (Slurm's estimate)"
    )
    # An estimate in the past is not shown as a wait: Slurm has not placed it anew yet.
    assert expected_start_text(NOW - timedelta(minutes=1), NOW) == (
        "Slurm expected it to start by 20:59 UTC; no newer estimate yet"
    )
    assert format_wait(timedelta(seconds=20)) == "under 1 min"
    assert format_wait(timedelta(days=2, hours=4, minutes=10)) == "2 d 4 h"
