"""Slurm's start estimates against actual starts: the correction and its accuracy.

Slurm plans as if running jobs use their whole limit; where jobs end at a third of it, its
waits run three times long. The samples are attempts recorded as the poll records them.
"""

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.accuracy import (
    MIN_SAMPLES,
    Sample,
    corrected_wait,
    factor_of,
    history_of,
    start_history,
)
from jobs.queue.start_estimates import record_estimates
from monitoring.job_page.header import header_facts
from tests import factories
from tests.jobs.test_queue_insight import _as

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def test_the_factor_is_the_median_ratio_of_actual_to_predicted_wait() -> None:
    samples = [Sample(predicted=p, actual=p / 3) for p in (600, 1200, 1800, 900, 300)]
    samples.append(Sample(predicted=600, actual=6000))  # one outlier moves a median little
    assert factor_of(samples) == pytest.approx(1 / 3)
    assert corrected_wait(3600, factor_of(samples)) == pytest.approx(1200)


def test_too_few_samples_or_a_start_of_now_are_left_as_slurm_said() -> None:
    few = [Sample(predicted=600, actual=200)] * (MIN_SAMPLES - 1)
    assert factor_of(few) is None
    assert corrected_wait(3600, None) == 3600
    # Estimates of "now" say nothing of how long jobs run: they are not samples of the ratio.
    nows = [Sample(predicted=5, actual=40)] * 20
    assert factor_of(nows) is None
    assert corrected_wait(30, 0.2) == 30


def test_accuracy_is_left_one_out_and_beats_slurm_alone_where_jobs_end_early() -> None:
    samples = [
        Sample(predicted=p, actual=p * r)
        for p, r in zip(
            (600, 1200, 1800, 2400, 3000, 3600, 900, 1500),
            (0.3, 0.35, 0.4, 0.3, 0.45, 0.35, 0.4, 0.3),
            strict=True,
        )
    ]
    history = history_of(samples)
    assert history.median_error is not None and history.raw_median_error is not None
    assert history.median_error < history.raw_median_error / 4
    assert "corrected from 8 past starts here: within" in history.text
    assert "(Slurm alone: within " in history.text
    exact = [dataclasses.replace(s, actual=s.predicted * 0.35) for s in samples]
    assert history_of(exact).median_error == pytest.approx(0)


def test_no_history_says_so_and_how_many_it_needs() -> None:
    assert history_of([]).text == "Slurm's own, uncorrected: no past estimates here yet"
    assert history_of([Sample(600, 200)]).text == (
        f"Slurm's own, uncorrected: 1 past estimate here, {MIN_SAMPLES} needed"
    )


def test_the_first_estimate_is_kept_with_when_it_was_read(project, member, cluster) -> None:
    _, attempt = factories.job(project, member, cluster)
    queue = _as(attempt, "809")
    record_estimates([attempt], queue)
    attempt.refresh_from_db()
    first, read = attempt.first_estimate_at, attempt.first_estimate_read_at
    assert first is not None and read is not None and first == attempt.expected_start_at
    later = {"809": dataclasses.replace(queue["809"], start_time=first + timedelta(minutes=9))}
    assert record_estimates([attempt], later) == 1
    attempt.refresh_from_db()
    assert attempt.expected_start_at == first + timedelta(minutes=9)
    assert (attempt.first_estimate_at, attempt.first_estimate_read_at) == (first, read)


def _started(project, member, cluster: Cluster, *, partition: str, predicted: int, actual: int):
    _, attempt = factories.job(project, member, cluster, partition=partition)
    read = NOW - timedelta(hours=2)
    Attempt.objects.filter(pk=attempt.pk).update(
        first_estimate_read_at=read,
        first_estimate_at=read + timedelta(seconds=predicted),
        started_at=read + timedelta(seconds=actual),
    )


def test_the_history_is_the_clusters_and_partitions_own(project, member, cluster) -> None:
    for predicted in (600, 1200, 1800, 2400, 3000):
        _started(
            project, member, cluster, partition="gpu", predicted=predicted, actual=predicted // 4
        )
        _started(project, member, cluster, partition="big", predicted=predicted, actual=predicted)
    other = factories.cluster("bern")
    _started(project, member, other, partition="gpu", predicted=600, actual=60)
    gpu = start_history(cluster_id=cluster.pk, partition="gpu", now=NOW)
    assert len(gpu.samples) == 5 and gpu.factor == pytest.approx(0.25)
    assert start_history(cluster_id=cluster.pk, partition="big", now=NOW).factor == 1.0
    assert start_history(cluster_id=cluster.pk, partition="", now=NOW).samples == ()
    months_later = NOW + timedelta(weeks=5)
    assert start_history(cluster_id=cluster.pk, partition="gpu", now=months_later).samples == ()


def test_a_pending_jobs_page_shows_the_corrected_start_and_how_right_past_ones_were(
    project, member, cluster
) -> None:
    for predicted in (600, 1200, 1800, 2400, 3000, 3600):
        _started(
            project, member, cluster, partition="gpu", predicted=predicted, actual=predicted // 3
        )
    job, attempt = factories.job(project, member, cluster, partition="gpu")
    attempt.state, attempt.expected_start_at = State.PENDING, NOW + timedelta(minutes=30)
    facts = header_facts(job=job, attempts=[attempt], now=NOW)
    assert facts.expected_start == (
        "expected to start in about 10 min (Slurm says 30 min; corrected from 6 past starts "
        "here: within 1 min for half, within 1 min for 9 in 10 (Slurm alone: within 23 min for half))"
    )
