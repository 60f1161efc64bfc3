"""The series store since a poll writes one block per attempt: every reader gives back exactly
the points and last points appended, checked against a plain list of every point.

Before, each series got its own rows every poll; now an attempt's new points share one
`SeriesBlock` and its last points one `SeriesHead`, and compaction turns blocks into the
same per-series chunks as before. The reference here is what the store always promised:
every point appended, sorted by x (equal xs in no particular order), a NaN or infinite
value as a gap at its x, the last point in arrival order as the live number. Reads go through blocks and chunks at every
stage of the compaction cycle, with bursts, repeated steps and NaNs.
"""

import math
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from jobs.models import Attempt
from monitoring.models import SeriesBlock, SeriesChunk, SeriesHead
from monitoring.runs.compare import curves_read
from monitoring.series import compact as series_compact
from monitoring.series.chunks import Piece
from monitoring.series.overwrite import series_delete, series_overwrite
from monitoring.series.read import last_points, series_last, series_names, series_read
from monitoring.series.write import FANOUT, MAX_PENDING, series_append
from projects.models import Project
from tests import factories

Point = tuple[int, str, float, float]


class Reference:
    """Every point appended, per series, in arrival order: finite values, and gaps (a NaN or
    infinite value, kept as NaN at its x)."""

    def __init__(self) -> None:
        self.points: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
        self.gaps: dict[tuple[int, str], list[float]] = defaultdict(list)
        self.last: dict[tuple[int, str], tuple[float, float]] = {}

    def append(self, points: list[Point]) -> None:
        series_append(points=points)
        for attempt_id, name, x, y in points:
            if not math.isfinite(x):
                continue
            key = (attempt_id, name)
            if math.isfinite(y):
                self.points[key].append((x, y))
            else:
                self.gaps[key].append(x)
            self.last[key] = (x, y if math.isfinite(y) else math.nan)

    def check(self, attempt_ids: list[int], rng: np.random.Generator) -> None:
        for attempt_id in attempt_ids:
            names = sorted(n for a, n in self.last if a == attempt_id)
            assert series_names(attempt_id=attempt_id) == names
            assert set(last_points(attempt_ids=[attempt_id]).get(attempt_id, {})) == set(names)
        last = series_last(attempt_ids=attempt_ids, names={n for _, n in self.last})
        assert {k: _nan_is_none(p) for k, p in last.items()} == {
            k: _nan_is_none(p) for k, p in self.last.items()
        }
        for key in self.last:
            attempt_id, name = key
            found, gaps = self.points[key], self.gaps[key]
            read = series_read(attempt_id=attempt_id, name=name, max_points=10**7)
            assert sorted(zip(read.xs, read.ys, strict=True)) == sorted(found)
            assert sorted(read.nonfinite) == sorted(gaps)
            assert read.xs == sorted(read.xs) and read.total == len(found) + len(gaps)
            top = max([x for x, _ in found] + gaps)
            lo, hi = sorted(rng.uniform(-5, 1.1 * top, size=2).tolist())
            part = series_read(
                attempt_id=attempt_id, name=name, x_from=lo, x_to=hi, max_points=10**7
            )
            inside = sorted((x, y) for x, y in found if lo <= x <= hi)
            assert sorted(zip(part.xs, part.ys, strict=True)) == inside
            assert sorted(part.nonfinite) == sorted(x for x in gaps if lo <= x <= hi)


def _nan_is_none(point: tuple[float, float]) -> tuple[float, float | None]:
    return point[0], None if math.isnan(point[1]) else point[1]


@pytest.fixture
def attempts(project: Project, member: User) -> list[Attempt]:
    cluster = factories.cluster()
    return [factories.job(project, member, cluster)[1] for _ in range(3)]


def _poll(attempts: list[Attempt], step: int, rng: np.random.Generator) -> list[Point]:
    """What a poll might bring: a few series each, sometimes several points or a burst,
    now and then a step again, a NaN, or a series that only some polls have."""
    points: list[Point] = []
    for attempt in attempts:
        for name in ("loss", "lr", "gpu/n1/0/utilization"):
            if name == "lr" and step % 3:
                continue  # an evaluation-like series: only some polls
            many = int(rng.choice([1, 1, 1, 2, 5]))
            for k in range(many):
                x = float(step * 10 + k)
                points.append((attempt.pk, name, x, float(rng.normal())))
        if rng.random() < 0.1:
            gap = float(rng.choice([math.nan, math.inf, -math.inf]))
            points.append((attempt.pk, "loss", float(step * 10), gap))
        if step and rng.random() < 0.2:  # a step given again: the store keeps both values
            points.append((attempt.pk, "loss", float((step - 1) * 10), float(rng.normal())))
    return points


def test_every_reader_gives_back_what_was_appended_at_each_stage(attempts: list[Attempt]) -> None:
    rng = np.random.default_rng(18)
    reference = Reference()
    ids = [a.pk for a in attempts]
    for step in range(3 * FANOUT + 2):  # every attempt through three compactions, and more
        reference.append(_poll(attempts, step, rng))
        if step == FANOUT + 3:  # a burst: past MAX_PENDING it goes to chunks at once
            burst = np.arange(1000.0, 1000.0 + MAX_PENDING + 17)
            reference.append([(ids[1], "burst", x, x / 2) for x in burst.tolist()])
        if step % 5 == 0 or step == FANOUT + 3:
            reference.check(ids, rng)
        assert SeriesBlock.objects.filter(attempt_id=ids[0]).count() < FANOUT
    reference.check(ids, rng)
    assert SeriesChunk.objects.filter(series__attempt_id__in=ids).exists()
    assert SeriesBlock.objects.filter(attempt_id__in=ids).exists()


def test_compare_reads_blocks_and_chunks_of_every_attempt(attempts: list[Attempt]) -> None:
    rng = np.random.default_rng(7)
    reference = Reference()
    for step in range(FANOUT + 5):  # some of each attempt's points compacted, some not
        reference.append(_poll(attempts, step, rng))
    jobs = [attempt.job for attempt in attempts]
    curves = curves_read(jobs=jobs, metric="loss", width=4000)
    for attempt, curve in zip(attempts, curves, strict=True):
        found = reference.points[(attempt.pk, "loss")]
        gaps = reference.gaps[(attempt.pk, "loss")]
        assert curve.total == len(found) + len(gaps)
        assert sorted(zip(curve.xs, curve.ys, strict=True)) == sorted(found)
        assert sorted(curve.nonfinite) == sorted(gaps)


def test_overwrite_and_delete_reach_the_points_still_in_blocks(attempts: list[Attempt]) -> None:
    one = attempts[0]
    # A new head starts part-way through the compaction cycle, where its attempt's id puts
    # it (one in FANOUT - 1 compacts at its second append); this one starts at the cycle's
    # start, so that both appends below stay in blocks.
    SeriesHead.objects.create(attempt=one)
    series_append(points=[(one.pk, "loss", float(x), 1.0) for x in range(5)])
    series_append(points=[(one.pk, "lr", 1.0, 0.1), (one.pk, "loss", 5.0, 1.0)])
    assert not SeriesChunk.objects.filter(series__attempt=one).exists()  # all in blocks so far
    assert series_overwrite(repeats=[(one.pk, "loss", 2.0), (one.pk, "loss", 5.0)]) == 2
    series_append(points=[(one.pk, "loss", 2.0, 9.0)])
    read = series_read(attempt_id=one.pk, name="loss")
    assert list(zip(read.xs, read.ys, strict=True)) == [
        (0.0, 1.0),
        (1.0, 1.0),
        (2.0, 9.0),
        (3.0, 1.0),
        (4.0, 1.0),
    ]
    series_delete(attempt_id=one.pk, names=["loss"])
    assert series_names(attempt_id=one.pk) == ["lr"]
    assert series_read(attempt_id=one.pk, name="loss").total == 0
    assert series_read(attempt_id=one.pk, name="lr").ys == [0.1]
    series_delete(attempt_id=one.pk, names=["lr"])
    assert not SeriesBlock.objects.filter(attempt=one).exists()  # emptied blocks go
    assert series_names(attempt_id=one.pk) == []
    assert SeriesHead.objects.filter(attempt=one).exists()  # the head stays, for the cycle


@pytest.mark.parametrize("count", [1, 2, 3, 16, 64])
def test_level_one_rows_at_once_are_the_rows_made_one_by_one(count: int) -> None:
    """Compaction of a usual poll's blocks makes every series' chunk row in one go; each must
    be the row `chunk_row` makes of that series alone (bounds, blob, summary)."""
    rng = np.random.default_rng(count)
    xs = np.cumsum(rng.integers(0, 3, size=(count, 6)), axis=0).astype(float)
    ys = rng.integers(0, 3, size=(count, 6)).astype(float)  # ties: the first extreme wins
    ys[:, 1] = 4.0  # constant: its summary is one point
    ys[:, 2] = -np.arange(count)  # falling
    if count > 1:
        xs[:, 3] = xs[::-1, 3]  # a step back in x: left to the general path
    series = [10, 11, 12, 13, 14, 15]
    rest: list[tuple[int, np.ndarray, np.ndarray]] = []
    rows = series_compact.level_one_rows(series, xs, ys, rest=rest, unless={15})
    by_one = {
        sid: series_compact.chunk_row(sid, Piece(1, xs[:, at], ys[:, at]))
        for at, sid in enumerate(series)
    }
    assert rows == [by_one[row[0]] for row in rows]
    going_back = {13} if count > 1 and not np.all(np.diff(xs[:, 3]) >= 0) else set()
    assert {sid for sid, _, _ in rest} == {15, *going_back}
    assert {row[0] for row in rows} == set(series) - {15, *going_back}


# --- the migration ---------------------------------------------------------------------

BEFORE = [("monitoring", "0012_series_write_path")]


def _migrate(target: list[tuple[str, str]]) -> object:
    executor = MigrationExecutor(connection)
    executor.migrate(target)
    executor.loader.build_graph()
    return executor.loader.project_state(target).apps


@pytest.fixture
def latest() -> Iterator[list[tuple[str, str]]]:
    """The monitoring app's latest migration, migrated back to at the end whatever happens."""
    executor = MigrationExecutor(connection)
    leaf = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "monitoring"]
    try:
        yield leaf
    finally:
        _migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_point_and_last_point(
    project: Project, member: User, latest: list[tuple[str, str]]
) -> None:
    attempt = factories.job(project, member, factories.cluster())[1]
    old = _migrate(BEFORE)
    series = old.get_model("monitoring", "Series")  # type: ignore[attr-defined]
    chunk = old.get_model("monitoring", "SeriesChunk")  # type: ignore[attr-defined]
    loss = series.objects.create(attempt_id=attempt.pk, name="loss", last_x=3.0, last_y=0.5)
    gpu = series.objects.create(attempt_id=attempt.pk, name="gpu/n1/0/power", last_x=9.0, last_y=7)
    # As the per-series append left them: a compacted chunk and level-0 chunks of one point.
    rows = [(loss, 1, [0.0, 1.0], [0.9, 0.8]), (loss, 0, [3.0], [0.5]), (loss, 0, [2.0], [0.6])]
    rows += [(gpu, 0, [9.0], [7.0])]
    for owner, level, xs, ys in rows:
        blob = np.asarray(xs + ys, dtype="<f8").tobytes()
        chunk.objects.create(
            series=owner,
            level=level,
            count=len(xs),
            x_min=xs[0],
            x_max=xs[-1],
            y_min=min(ys),
            y_max=max(ys),
            data=blob,
            summary=blob,
        )
    _migrate(latest)
    assert series_names(attempt_id=attempt.pk) == ["gpu/n1/0/power", "loss"]
    assert series_last(attempt_ids=[attempt.pk], names=["loss", "gpu/n1/0/power"]) == {
        (attempt.pk, "loss"): (3.0, 0.5),
        (attempt.pk, "gpu/n1/0/power"): (9.0, 7.0),
    }
    assert series_read(attempt_id=attempt.pk, name="loss").ys == [0.9, 0.8, 0.6, 0.5]
    # Appends go on from there; the level-0 chunks merge at the attempt's next compaction.
    for x in range(4, 4 + FANOUT):
        series_append(points=[(attempt.pk, "loss", float(x), 0.1)])
    assert not SeriesChunk.objects.filter(series__attempt=attempt, series__name="loss", level=0)
    read = series_read(attempt_id=attempt.pk, name="loss")
    assert read.xs == [float(x) for x in range(4 + FANOUT)]
    assert read.ys[:4] == [0.9, 0.8, 0.6, 0.5] and set(read.ys[4:]) == {0.1}

    # And back: the heads' last points and the blocks' points return to per-series rows.
    series_append(points=[(attempt.pk, "loss", 100.0, 0.05)])
    old = _migrate(BEFORE)
    series = old.get_model("monitoring", "Series")  # type: ignore[attr-defined]
    chunk = old.get_model("monitoring", "SeriesChunk")  # type: ignore[attr-defined]
    back = series.objects.get(attempt_id=attempt.pk, name="loss")
    assert (back.last_x, back.last_y) == (100.0, 0.05)
    counts = chunk.objects.filter(series=back).values_list("count", flat=True)
    assert sum(counts) == 4 + FANOUT + 1
