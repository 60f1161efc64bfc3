"""Deleting stored points: those a poll's points replace (one value per step, the newest),
and whole series that another file takes over.

`monitoring.reading.overwrite` states the rule; ingest marks the points that may repeat a stored
step (at or below the highest step their file gave before), so a poll of new steps costs
no query here. A chunk that holds a replaced point is rewritten without it, as a new row
of the same level (a reader that planned with the old row's id plans again, as after a
compaction), or deleted when nothing is left; a block is rewritten in place (its id is
its place in arrival order). Kept apart from `monitoring.series.read`'s append path on
purpose: it runs just before the append, in the same transaction.
"""

from collections import defaultdict
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt

from monitoring.models.series import Series, SeriesBlock, SeriesChunk, SeriesHead
from monitoring.series.blocks import pack, unpack
from monitoring.series.chunks import decode, encode
from monitoring.series.downsample import Floats, summary, y_bounds
from portal_lib.bulk import Row, update_rows

DELETE_BATCH = 500  # series rows per delete statement

# Which of a block's points of (attempt id, name) stay, given their xs.
Mask = npt.NDArray[np.bool_]
Keep = Callable[[int, str, Floats], Mask]


def series_overwrite(*, repeats: Iterable[tuple[int, str, float]]) -> int:
    """Delete the stored points at these (attempt id, name, x); returns how many went."""
    wanted: dict[tuple[int, str], set[float]] = defaultdict(set)
    for attempt_id, name, x in repeats:
        wanted[(attempt_id, name)].add(float(x))
    if not wanted:
        return 0
    gone = {key: np.fromiter(xs, dtype=np.float64) for key, xs in wanted.items()}

    def keep(attempt_id: int, name: str, xs: Floats) -> Mask:
        replaced = gone.get((attempt_id, name))
        return np.ones(len(xs), dtype=bool) if replaced is None else ~np.isin(xs, replaced)

    deleted = _blocks_rewrite({attempt_id for attempt_id, _ in wanted}, keep)
    rows = Series.objects.filter(
        attempt_id__in={attempt_id for attempt_id, _ in wanted},
        name__in={name for _, name in wanted},
    ).values_list("id", "attempt_id", "name")
    xs_of = {sid: wanted[(a, n)] for sid, a, n in rows if (a, n) in wanted}
    if not xs_of:
        return deleted
    every = [x for xs in xs_of.values() for x in xs]
    bounds = SeriesChunk.objects.filter(
        series_id__in=xs_of, x_max__gte=min(every), x_min__lte=max(every)
    ).values_list("id", "series_id", "x_min", "x_max")
    hit = [chunk_id for chunk_id, sid, lo, hi in bounds if any(lo <= x <= hi for x in xs_of[sid])]
    if not hit:
        return deleted
    return deleted + _chunks_drop(
        hit, lambda sid, xs: np.isin(xs, np.fromiter(xs_of[sid], dtype=np.float64))
    )


def series_delete(*, attempt_id: int, names: list[str]) -> int:
    """Delete an attempt's series of these names: their chunks a batch of rows at a time,
    their points in its blocks, their last points in its head. Returns the series rows
    deleted."""
    unwanted = set(names)
    head = SeriesHead.objects.select_for_update().filter(attempt_id=attempt_id).first()
    if head is not None:
        last = unpack(head.data)
        kept = [at for at, name in enumerate(last.names) if name not in unwanted]
        if len(kept) < len(last.names):
            head.data = pack(
                [last.names[at] for at in kept], [1] * len(kept), last.xs[kept], last.ys[kept]
            )
            head.save(update_fields=["data"])

    def keep(_attempt_id: int, name: str, xs: Floats) -> Mask:
        return np.full(len(xs), name not in unwanted)

    _blocks_rewrite({attempt_id}, keep)
    deleted = 0
    for start in range(0, len(names), DELETE_BATCH):
        part = names[start : start + DELETE_BATCH]
        ids = list(
            Series.objects.filter(attempt_id=attempt_id, name__in=part).values_list("id", flat=True)
        )
        for at in range(0, len(ids), DELETE_BATCH):
            deleted += Series.objects.filter(id__in=ids[at : at + DELETE_BATCH]).delete()[0]
    return deleted


_BLOCK_COLUMNS = (("id", "bigint"), ("count", "integer"), ("data", "bytea"))


def _blocks_rewrite(attempt_ids: set[int], keep: Keep) -> int:
    """Drop the points `keep` refuses from these attempts' blocks; returns how many went.

    The attempts' heads are locked first, as an append does: no compaction of theirs can
    move a block's points into chunks between its read here and its rewrite."""
    heads = SeriesHead.objects.select_for_update().filter(attempt_id__in=attempt_ids)
    list(heads.order_by("attempt_id").values_list("attempt_id", flat=True))
    rewritten: list[Row] = []
    emptied: list[int] = []
    dropped = 0
    blocks = SeriesBlock.objects.filter(attempt_id__in=attempt_ids)
    for block_id, attempt_id, data in blocks.values_list("id", "attempt_id", "data"):
        block = unpack(data)
        names, counts, xs_parts, ys_parts = [], [], [], []
        for name, xs, ys in block.series():
            kept = keep(attempt_id, name, xs)
            dropped += len(xs) - int(kept.sum())
            if kept.any():
                names.append(name)
                counts.append(int(kept.sum()))
                xs_parts.append(xs[kept])
                ys_parts.append(ys[kept])
        if sum(counts) == len(block.xs):
            continue
        if not names:
            emptied.append(block_id)
            continue
        new_xs, new_ys = np.concatenate(xs_parts), np.concatenate(ys_parts)
        rewritten.append((block_id, len(new_xs), pack(names, counts, new_xs, new_ys)))
    update_rows(SeriesBlock._meta.db_table, _BLOCK_COLUMNS, rewritten)
    if emptied:
        SeriesBlock.objects.filter(id__in=emptied).delete()
    return dropped


def _chunk(series_id: int, level: int, xs: Floats, ys: Floats) -> SeriesChunk:
    y_min, y_max = y_bounds(ys)
    return SeriesChunk(
        series_id=series_id,
        level=level,
        count=len(xs),
        x_min=float(xs[0]),
        x_max=float(xs[-1]),
        y_min=y_min,
        y_max=y_max,
        data=encode(xs, ys),
        summary=encode(*summary(xs, ys)),
    )


def series_delete_range(*, ranges: Iterable[tuple[int, str, float, float]]) -> int:
    """Delete the stored points of (attempt id, name) with lo < x <= hi; returns how many
    went. A record file that now gives a metric up to step hi takes those steps over from
    stdout's copy, which it gave until then (`monitoring.ingest.records`)."""
    spans: dict[tuple[int, str], tuple[float, float]] = {}
    for attempt_id, name, lo, hi in ranges:
        if hi > lo:
            old = spans.get((attempt_id, name))
            spans[(attempt_id, name)] = (
                (lo, hi) if old is None else (min(old[0], lo), max(old[1], hi))
            )
    if not spans:
        return 0

    def inside(span: tuple[float, float], xs: Floats) -> Mask:
        return (xs > span[0]) & (xs <= span[1])

    def keep(attempt_id: int, name: str, xs: Floats) -> Mask:
        span = spans.get((attempt_id, name))
        return np.ones(len(xs), dtype=bool) if span is None else ~inside(span, xs)

    deleted = _blocks_rewrite({attempt_id for attempt_id, _ in spans}, keep)
    rows = Series.objects.filter(
        attempt_id__in={attempt_id for attempt_id, _ in spans},
        name__in={name for _, name in spans},
    ).values_list("id", "attempt_id", "name")
    span_of = {sid: spans[(a, n)] for sid, a, n in rows if (a, n) in spans}
    if not span_of:
        return deleted
    bounds = SeriesChunk.objects.filter(
        series_id__in=span_of,
        x_max__gt=min(lo for lo, _ in span_of.values()),
        x_min__lte=max(hi for _, hi in span_of.values()),
    ).values_list("id", "series_id", "x_min", "x_max")
    hit = [
        chunk_id
        for chunk_id, sid, x_min, x_max in bounds
        if x_max > span_of[sid][0] and x_min <= span_of[sid][1]
    ]
    return deleted + _chunks_drop(hit, lambda sid, xs: inside(span_of[sid], xs))


def _chunks_drop(chunk_ids: list[int], dropping: Callable[[int, Floats], Mask]) -> int:
    """Rewrite these chunks without the points `dropping(series_id, xs)` marks; the points
    dropped."""
    new: list[SeriesChunk] = []
    emptied: list[int] = []
    deleted = 0
    for chunk in SeriesChunk.objects.filter(id__in=chunk_ids).only(
        "id", "series_id", "level", "data"
    ):
        xs, ys = decode(chunk.data)
        kept = ~dropping(chunk.series_id, xs)
        if kept.all():
            continue
        emptied.append(chunk.id)
        deleted += int((~kept).sum())
        if kept.any():
            new.append(_chunk(chunk.series_id, chunk.level, xs[kept], ys[kept]))
    SeriesChunk.objects.bulk_create(new)
    SeriesChunk.objects.filter(id__in=emptied).delete()
    return deleted
