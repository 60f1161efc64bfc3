"""The chunked series store, on the real PostgreSQL test database."""

import math
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.models import Attempt
from monitoring.models import Series, SeriesBlock, SeriesChunk, SeriesHead
from monitoring.models.series import CHUNK_SIZE
from monitoring.series import read as series
from monitoring.series import write as series_write
from projects.models import Project
from tests import factories


@pytest.fixture
def attempts(project: Project, member: User) -> list[Attempt]:
    cluster = factories.cluster()
    return [factories.job(project, member, cluster)[1] for _ in range(3)]


def points(attempt: Attempt, name: str, xs: np.ndarray, ys: np.ndarray) -> list:
    return [(attempt.pk, name, x, y) for x, y in zip(xs.tolist(), ys.tolist(), strict=True)]


def everything(attempt: Attempt, name: str, **bounds: float) -> series.SeriesData:
    return series.series_read(attempt_id=attempt.pk, name=name, max_points=10**7, **bounds)


def check_chunks() -> None:
    """Each stored chunk holds what its bounds say, sorted by x."""
    for chunk in SeriesChunk.objects.all():
        xs, ys = series.decode(bytes(chunk.data))
        assert len(xs) == chunk.count <= CHUNK_SIZE
        assert np.all(np.diff(xs) >= 0)
        finite = ys[~np.isnan(ys)]
        assert (xs[0], xs[-1], finite.min(), finite.max()) == (
            chunk.x_min,
            chunk.x_max,
            chunk.y_min,
            chunk.y_max,
        )


def test_points_come_back_per_attempt_and_name(attempts: list[Attempt]) -> None:
    one, two, _ = attempts
    stored = series_write.series_append(
        points=[
            (one.pk, "loss", 1.0, 2.5),
            (one.pk, "lr", 1.0, 0.1),
            (two.pk, "loss", 1.0, 9.0),
            (one.pk, "loss", 2.0, 2.0),
        ]
    )
    assert stored == 4
    loss = everything(one, "loss")
    assert (loss.xs, loss.ys, loss.total, loss.downsampled) == ([1.0, 2.0], [2.5, 2.0], 2, False)
    assert everything(two, "loss").ys == [9.0]
    assert series.series_names(attempt_id=one.pk) == ["loss", "lr"]
    assert series.series_names(attempt_id=attempts[2].pk) == []
    assert everything(one, "missing") == series.SeriesData(xs=[], ys=[], total=0, downsampled=False)


def test_nan_and_infinite_values_are_gaps_of_their_own_series(attempts: list[Attempt]) -> None:
    one = attempts[0]
    stored = series_write.series_append(
        points=[
            (one.pk, "loss", 1.0, 1.0),
            (one.pk, "loss", 2.0, math.nan),
            (one.pk, "loss", 3.0, math.inf),
            (one.pk, "loss", math.nan, 4.0),  # no x: nowhere to draw it
            (one.pk, "loss", 5.0, 5.0),
            (one.pk, "diverged", 1.0, -math.inf),
        ]
    )
    assert stored == 5
    loss = everything(one, "loss")
    assert (loss.xs, loss.ys, loss.nonfinite, loss.total) == ([1.0, 5.0], [1.0, 5.0], [2.0, 3.0], 4)
    assert loss.with_gaps() == ([1.0, 2.0, 3.0, 5.0], [1.0, None, None, 5.0])
    diverged = everything(one, "diverged")
    assert (diverged.xs, diverged.nonfinite) == ([], [1.0])
    assert series.series_names(attempt_id=one.pk) == ["diverged", "loss"]
    assert series_write.series_append(points=[]) == 0


def test_over_long_names_are_skipped_not_fatal(attempts: list[Attempt]) -> None:
    one = attempts[0]
    stored = series_write.series_append(
        points=[(one.pk, "x" * 201, 1.0, 1.0), (one.pk, "ok", 1.0, 1.0)]
    )
    assert stored == 1
    assert series.series_names(attempt_id=one.pk) == ["ok"]


def count_queries(batch: list) -> int:
    with CaptureQueriesContext(connection) as queries:
        series_write.series_append(points=batch)
    return len(queries)


def test_append_costs_the_same_queries_for_one_series_or_hundreds(
    attempts: list[Attempt],
) -> None:
    names = [f"gpu/n1/{gpu}/{metric}" for gpu in range(25) for metric in ("utilization", "power")]
    many = [(a.pk, name, 1.0, 1.0) for a in attempts for name in names]  # 150 series
    # Savepoint; the heads read and locked; the missing ones made and read; the heads
    # staged (temporary table, COPY) and updated from there; the blocks copied in; release.
    assert count_queries(many) == 9
    # Where each head starts in the compaction cycle depends on its attempt's id; start
    # them all at its beginning, so that the next appends are plain ones whatever the ids.
    SeriesHead.objects.update(blocks=1)
    assert count_queries([(x[0], x[1], 2.0, 1.0) for x in many]) == 7
    assert count_queries([(attempts[0].pk, "loss", 2.0, 1.0)]) == 7
    # A call that compacts attempts, however many, adds: their blocks read, their Series
    # rows read (the first time the missing ones also staged and inserted: three more),
    # their small chunks listed, the blocks deleted, the new chunks copied in.
    counts = [
        count_queries([(x[0], x[1], float(step), 1.0) for x in many])
        for step in range(3, 3 + series_write.FANOUT)
    ]
    assert set(counts) == {7, 15}
    compacted = SeriesChunk.objects.filter(series__name__startswith="gpu/", level=1)
    assert compacted.count() == 150  # each series once, within FANOUT appends
    assert SeriesBlock.objects.count() < 3 * series_write.FANOUT
    assert everything(attempts[2], names[-1]).xs == [*range(1, 3 + series_write.FANOUT)]


@pytest.mark.parametrize("copy", [True, False], ids=["binary COPY", "plain SQL"])
def test_both_write_paths_store_the_same_points(
    attempts: list[Attempt], copy: bool, settings: Any
) -> None:
    """COPY on PostgreSQL; the plain statements SQLite gets, here on the same tables."""
    settings.BULK_COPY = copy
    one, two, _ = attempts
    for step in range(2 * series_write.FANOUT):  # through a compaction of every series
        batch = [(one.pk, "loss", float(step), step / 2), (two.pk, "lr", float(step), 1.0)]
        batch += [(one.pk, "loss", float(step), math.nan)] if step % 3 == 0 else []
        series_write.series_append(points=batch)
    check_chunks()
    loss = everything(one, "loss")
    assert loss.xs == [float(s) for s in range(2 * series_write.FANOUT)]
    assert loss.ys == [s / 2 for s in range(2 * series_write.FANOUT)]
    assert loss.nonfinite == [float(s) for s in range(0, 2 * series_write.FANOUT, 3)]
    assert everything(two, "lr").ys == [1.0] * 2 * series_write.FANOUT
    last = series.series_last(attempt_ids=[one.pk], names=["loss"])
    assert last == {(one.pk, "loss"): (2.0 * series_write.FANOUT - 1, series_write.FANOUT - 0.5)}


def test_compaction_keeps_every_point_and_few_small_chunks(attempts: list[Attempt]) -> None:
    one = attempts[0]
    rng = np.random.default_rng(1)
    xs = np.arange(30_000, dtype=float)
    ys = rng.normal(size=len(xs))
    start = 0
    while start < len(xs):  # batches of 1 to 500 points, mostly small
        size = int(rng.choice([1, 1, 1, 7, 60, 500]))
        series_write.series_append(
            points=points(one, "loss", xs[start : start + size], ys[start : start + size])
        )
        start += size
        assert SeriesChunk.objects.filter(count__lt=CHUNK_SIZE).count() <= 3 * series_write.FANOUT
        assert SeriesBlock.objects.count() < series_write.FANOUT
    check_chunks()
    read = everything(one, "loss")
    assert read.xs == xs.tolist() and read.ys == ys.tolist() and read.total == len(xs)


def test_repeated_steps_after_a_resume_keep_both_values(attempts: list[Attempt]) -> None:
    one = attempts[0]
    series_write.series_append(points=points(one, "loss", np.arange(0.0, 100.0), np.zeros(100)))
    series_write.series_append(points=points(one, "loss", np.arange(50.0, 150.0), np.ones(100)))
    read = everything(one, "loss")
    assert read.total == 200
    assert read.xs == sorted([*range(100), *range(50, 150)])
    assert sorted(zip(read.xs, read.ys, strict=True))[50:52] == [(50.0, 0.0), (50.0, 1.0)]
    assert series.series_last(attempt_ids=[one.pk], names=["loss"]) == {
        (one.pk, "loss"): (149.0, 1.0)
    }


def test_range_bounds_are_inclusive(attempts: list[Attempt]) -> None:
    one = attempts[0]
    series_write.series_append(points=points(one, "loss", np.arange(10.0), np.arange(10.0) * 2))
    assert everything(one, "loss", x_from=3, x_to=5).xs == [3.0, 4.0, 5.0]
    assert everything(one, "loss", x_from=8.5).xs == [9.0]
    assert everything(one, "loss", x_to=0).ys == [0.0]
    assert everything(one, "loss", x_from=20).total == 0
    assert everything(one, "loss", x_from=5, x_to=4).total == 0


def test_last_points_for_many_series_in_one_query(attempts: list[Attempt]) -> None:
    one, two, three = attempts
    series_write.series_append(
        points=[
            (one.pk, "loss", 10.0, 0.5),
            (one.pk, "loss", 9.0, 0.7),  # arrived last: the live number, though x is smaller
            (two.pk, "loss", 3.0, 1.5),
            (two.pk, "gpu/n1/0/utilization", 1.7e9, 88.0),
            (three.pk, "loss", 1.0, 1.0),
        ]
    )
    with CaptureQueriesContext(connection) as queries:
        last = series.series_last(
            attempt_ids=[one.pk, two.pk], names=["loss", "gpu/n1/0/utilization"]
        )
    assert len(queries) == 1
    assert last == {
        (one.pk, "loss"): (9.0, 0.7),
        (two.pk, "loss"): (3.0, 1.5),
        (two.pk, "gpu/n1/0/utilization"): (1.7e9, 88.0),
    }


def test_series_go_with_their_attempt(attempts: list[Attempt]) -> None:
    one, two, _ = attempts
    series_write.series_append(points=[(one.pk, "loss", 1.0, 1.0), (two.pk, "loss", 1.0, 1.0)])
    burst = np.arange(2.0, series_write.MAX_PENDING + 1)  # with the first: one full chunk
    series_write.series_append(points=points(one, "loss", burst, burst))
    series_write.series_append(points=points(two, "loss", burst, burst))
    assert Series.objects.count() == SeriesChunk.objects.count() == 2
    one.job.delete()
    assert list(SeriesHead.objects.values_list("attempt_id", flat=True)) == [two.pk]
    assert list(Series.objects.values_list("attempt_id", flat=True)) == [two.pk]
    assert SeriesChunk.objects.count() == 1
    assert not SeriesBlock.objects.exists()
    assert everything(two, "loss").total == series_write.MAX_PENDING


def test_a_million_points_read_downsampled_with_spikes_kept(attempts: list[Attempt]) -> None:
    one = attempts[0]
    n = 1_000_000
    rng = np.random.default_rng(2)
    xs = np.arange(n, dtype=float)
    ys = rng.normal(size=n)
    ys[123_457] = 1000.0  # a loss spike inside a summarised chunk
    ys[876_543] = -1000.0
    series_write.series_append(points=points(one, "loss", xs, ys))

    series.series_read(attempt_id=one.pk, name="loss")  # warm
    # How fast: bench/series.py measures it.
    read = series.series_read(attempt_id=one.pk, name="loss", max_points=2000)
    assert len(read.xs) <= 2000 and read.total == n and read.downsampled
    assert (read.xs[0], read.ys[0]) == (0.0, ys[0])
    assert (read.xs[-1], read.ys[-1]) == (n - 1.0, ys[-1])
    assert max(read.ys) == 1000.0 and min(read.ys) == -1000.0
    assert read.xs[read.ys.index(1000.0)] == 123_457.0
    assert np.all(np.diff(read.xs) > 0)
    assert np.array_equal(ys[np.array(read.xs, dtype=int)], read.ys)  # real points only

    # A narrow zoom reads exactly its points, and only the chunks holding them.
    zoom = series.series_read(attempt_id=one.pk, name="loss", x_from=500_000, x_to=501_000)
    assert zoom.xs == xs[500_000:501_001].tolist() and zoom.ys == ys[500_000:501_001].tolist()
    assert not zoom.downsampled

    bounds = [
        series.ChunkBounds(*row)
        for row in SeriesChunk.objects.values_list("id", "x_min", "x_max", "count")
    ]
    wide = series.plan_read(bounds, lo=-math.inf, hi=math.inf, max_points=2000)
    assert len(wide.raw) == 2 and wide.summarised_count == n - sum(
        b.count for b in bounds if b.id in wide.raw
    )
    inside = [b for b in bounds if b.x_max >= 500_000 and b.x_min <= 501_000]
    narrow = series.plan_read(inside, lo=500_000, hi=501_000, max_points=2000)
    assert len(narrow.raw) <= 2 and narrow.summarised == []


def test_a_read_planned_before_a_compaction_plans_again(
    attempts: list[Attempt], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job page crashed when a poll compacted the chunks a read had just planned."""
    attempt = attempts[0]
    for step in range(0, 40 * CHUNK_SIZE // 8, CHUNK_SIZE // 8):
        series_write.series_append(
            points=[
                (attempt.pk, "loss", float(x), 1.0) for x in range(step, step + CHUNK_SIZE // 8)
            ]
        )
    expected = series.series_read(attempt_id=attempt.pk, name="loss", max_points=100_000)
    real_plan = series.plan_read
    compactions: list[int] = []

    def plan_then_compact(*args: Any, **kwargs: Any) -> series.ReadPlan:
        plan = real_plan(*args, **kwargs)
        if not compactions:
            # What a concurrent poll's compaction does: the planned chunks are replaced.
            chunks = SeriesChunk.objects.filter(series__attempt=attempt)
            rows = list(chunks.values())
            chunks.delete()
            SeriesChunk.objects.bulk_create(
                SeriesChunk(**{k: v for k, v in row.items() if k != "id"}) for row in rows
            )
            compactions.append(len(rows))
        return plan

    monkeypatch.setattr(series, "plan_read", plan_then_compact)
    again = series.series_read(attempt_id=attempt.pk, name="loss", max_points=100_000)
    assert compactions and compactions[0] > 1
    assert again.xs == expected.xs and again.total == expected.total
