"""Append points to the series behind every chart (the layout: `monitoring.series.read`).

Appending. A poll brings one or a few points for each of tens of thousands of series,
a few dozen series per attempt, so rows are per attempt, never per series: each append
writes one `SeriesBlock` per attempt holding all its new points (`monitoring.series.blocks`),
and rewrites the attempt's `SeriesHead` (every series' last point, and a counter). A
call costs the same few queries whatever the number of attempts or series: the heads
read (locked), the heads written, the blocks inserted. On PostgreSQL the rows travel by
binary COPY (`portal_lib.bulk`); SQLite gets the same rows as plain statements.

Every FANOUT-th append of an attempt (staggered between attempts), or once its blocks
would hold MAX_PENDING points, compacts it in the same call instead of writing a block
(`monitoring.series.compact`): its blocks and new points become one chunk per series,
like a small LSM tree whose level 0 is the blocks. So a series read decodes at most
FANOUT - 1 small blocks beside its chunks, and a burst goes to chunks at once.

Where a rule about the points themselves belongs (which of two values for one step
is kept, say): `attempt_batches` sees each call's points per series in arrival order,
and compaction sees a series' stored pieces in arrival order (block and chunk ids grow
with arrival, COPY included) before the new ones.
"""

import logging
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import accumulate, pairwise

import numpy as np
from django.db import transaction

from monitoring.models.series import CHUNK_SIZE, Series, SeriesBlock, SeriesHead
from monitoring.series.blocks import Block, pack, pack_points, unpack
from monitoring.series.compact import FANOUT, attempts_compact
from monitoring.series.downsample import Floats
from portal_lib.bulk import insert_rows, update_rows

log = logging.getLogger(__name__)

MAX_PENDING = CHUNK_SIZE  # points an attempt's blocks may hold
NAME_MAX = Series._meta.get_field("name").max_length or 200


@dataclass(frozen=True)
class Batch:
    """One attempt's points of a call, series by series, each in arrival order."""

    names: tuple[str, ...]
    counts: tuple[int, ...]
    xs: Floats
    ys: Floats

    def fields(self) -> tuple[tuple[str, ...], tuple[int, ...], Floats, Floats]:
        return self.names, self.counts, self.xs, self.ys

    def block(self) -> Block:
        return Block(self.names, (0, *accumulate(self.counts)), self.xs, self.ys)


# --- appending -----------------------------------------------------------------------


def series_append(*, points: Iterable[tuple[int, str, float, float]]) -> int:
    """Store (attempt_id, name, x, y) points of any attempts and series; returns how many."""
    batches = attempt_batches(points)
    if not batches:
        return 0
    with transaction.atomic():
        heads = _heads_locked(sorted(batches))
        due: dict[int, Batch] = {}
        head_rows, block_rows = [], []
        for attempt_id, batch in batches.items():
            blocks, pending, last = heads[attempt_id]
            pending += len(batch.xs)
            if blocks + 1 >= FANOUT or pending >= MAX_PENDING:
                due[attempt_id] = batch
                blocks = pending = 0
            else:
                blocks += 1
                block_rows.append((attempt_id, len(batch.xs), pack(*batch.fields())))
            head_rows.append((attempt_id, blocks, pending, _head(last, batch)))
        update_rows(SeriesHead._meta.db_table, _HEAD_COLUMNS, head_rows)
        insert_rows(SeriesBlock._meta.db_table, _BLOCK_COLUMNS, block_rows)
        if due:
            attempts_compact({a: b.block() for a, b in due.items()})
    return sum(len(batch.xs) for batch in batches.values())


_HEAD_COLUMNS = (
    ("attempt_id", "bigint"),
    ("blocks", "smallint"),
    ("points", "integer"),
    ("data", "bytea"),
)
_BLOCK_COLUMNS = (("attempt_id", "bigint"), ("count", "integer"), ("data", "bytea"))


def attempt_batches(points: Iterable[tuple[int, str, float, float]]) -> dict[int, Batch]:
    """Group points by attempt and series, each series in arrival order.

    A point whose x is not finite is left out; a y that is not finite (NaN, an
    infinity) is kept as NaN, the gap mark (`monitoring.series.read`). A poll brings one
    or a few points for each of tens of thousands of series, so the points go into numpy
    once, whole, and each attempt gets a slice of them.
    """
    keys: dict[tuple[int, str], int] = {}
    unnamed: list[int] = []
    groups: list[int] = []
    x_list: list[float] = []
    y_list: list[float] = []
    group_of, add_group, add_x, add_y = keys.get, groups.append, x_list.append, y_list.append
    for attempt_id, name, x, y in points:
        key = (attempt_id, name)
        group = group_of(key)
        if group is None:
            group = keys[key] = len(keys)
            if not name or len(name) > NAME_MAX:
                unnamed.append(group)
        add_group(group)
        add_x(x)
        add_y(y)
    if not groups:
        return {}
    xs = np.asarray(x_list, dtype=np.float64)
    ys = np.asarray(y_list, dtype=np.float64)
    ids = np.asarray(groups, dtype=np.int64)
    ys[np.isinf(ys)] = np.nan
    keep = np.isfinite(xs)
    key_list = list(keys)
    if unnamed:
        for group in unnamed:
            attempt_id, name = key_list[group]
            log.warning(
                "series name %r of attempt %s skipped: 1-%s characters",
                name[:300],
                attempt_id,
                NAME_MAX,
            )
        keep &= ~np.isin(ids, unnamed)
    if not keep.all():
        xs, ys, ids = xs[keep], ys[keep], ids[keep]
    # The series of one attempt next to each other, in the order they first came.
    attempt_of = np.fromiter((attempt for attempt, _ in key_list), np.int64, len(key_list))
    by_attempt = np.argsort(attempt_of, kind="stable")
    rank = np.empty(len(key_list), dtype=np.int64)
    rank[by_attempt] = np.arange(len(key_list))
    ranks = rank[ids]
    order = np.argsort(ranks, kind="stable")  # stable: arrival order within a series
    xs, ys = xs[order], ys[order]
    present, counts = np.unique(ranks, return_counts=True)
    if not len(present):
        return {}
    offsets = np.concatenate(([0], np.cumsum(counts))).tolist()
    series = by_attempt[present]
    attempts = attempt_of[series]
    cuts = [0, *(np.flatnonzero(np.diff(attempts)) + 1).tolist(), len(series)]
    names = [key_list[at][1] for at in series.tolist()]
    count_list = counts.tolist()
    batches = {}
    for lo, hi in pairwise(cuts):
        start, stop = offsets[lo], offsets[hi]
        batches[int(attempts[lo])] = Batch(
            tuple(names[lo:hi]), tuple(count_list[lo:hi]), xs[start:stop], ys[start:stop]
        )
    return batches


# --- heads -----------------------------------------------------------------------------


def _heads_locked(attempt_ids: list[int]) -> dict[int, tuple[int, int, Block]]:
    """Each attempt's head as (blocks, points, last points), made where missing; locked for
    this transaction in attempt order, so concurrent appenders of an attempt take turns."""
    heads = SeriesHead.objects.select_for_update().order_by("attempt_id")
    found = {
        attempt_id: (blocks, points, unpack(data))
        for attempt_id, blocks, points, data in heads.filter(
            attempt_id__in=attempt_ids
        ).values_list("attempt_id", "blocks", "points", "data")
    }
    missing = [attempt_id for attempt_id in attempt_ids if attempt_id not in found]
    if missing:
        SeriesHead.objects.bulk_create(
            [SeriesHead(attempt_id=a, blocks=_first_count(a)) for a in missing],
            ignore_conflicts=True,  # another appender made it first: read below
        )
        found.update(
            (attempt_id, (blocks, points, unpack(data)))
            for attempt_id, blocks, points, data in heads.filter(
                attempt_id__in=missing
            ).values_list("attempt_id", "blocks", "points", "data")
        )
    return found


def _first_count(attempt_id: int) -> int:
    """Where a new head starts in the compaction cycle: spread over it by attempt, and
    never at its end, so that a first append always writes a block."""
    return zlib.crc32(str(attempt_id).encode()) % (FANOUT - 1)


def _head(last: Block, batch: Batch) -> bytes:
    """The head's new data: `last` with the batch's last points laid over it."""
    if batch.counts == (1,) * len(batch.counts):  # the usual poll: a point per series
        new_xs, new_ys = batch.xs, batch.ys
    else:
        ends = np.cumsum(batch.counts) - 1
        new_xs, new_ys = batch.xs[ends], batch.ys[ends]
    if last.names == batch.names:  # the usual poll: every series once more
        return pack_points(batch.names, new_xs, new_ys)
    merged = last.last_points()
    merged.update(zip(batch.names, zip(new_xs.tolist(), new_ys.tolist(), strict=True), strict=True))
    names = list(merged)
    return pack_points(
        names,
        np.fromiter((merged[n][0] for n in names), dtype=np.float64, count=len(names)),
        np.fromiter((merged[n][1] for n in names), dtype=np.float64, count=len(names)),
    )
