"""Deleting the stored points that a poll's points replace (one value per step, the newest).

`monitoring.overwrite` states the rule; ingest marks the points that may repeat a stored
step (at or below the highest step their file gave before), so a poll of new steps costs
no query here. A chunk that holds a replaced point is rewritten without it, as a new row
of the same level (a reader that planned with the old row's id plans again, as after a
compaction), or deleted when nothing is left. Kept apart from `monitoring.series`'s
append path on purpose: it runs just before the append, in the same transaction.
"""

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from monitoring.chunks import decode, encode
from monitoring.downsample import Floats, summary
from monitoring.models.series import Series, SeriesChunk


def series_overwrite(*, repeats: Iterable[tuple[int, str, float]]) -> int:
    """Delete the stored points at these (attempt id, name, x); returns how many went."""
    wanted: dict[tuple[int, str], set[float]] = defaultdict(set)
    for attempt_id, name, x in repeats:
        wanted[(attempt_id, name)].add(float(x))
    if not wanted:
        return 0
    rows = Series.objects.filter(
        attempt_id__in={attempt_id for attempt_id, _ in wanted},
        name__in={name for _, name in wanted},
    ).values_list("id", "attempt_id", "name")
    xs_of = {sid: wanted[(a, n)] for sid, a, n in rows if (a, n) in wanted}
    if not xs_of:
        return 0
    every = [x for xs in xs_of.values() for x in xs]
    bounds = SeriesChunk.objects.filter(
        series_id__in=xs_of, x_max__gte=min(every), x_min__lte=max(every)
    ).values_list("id", "series_id", "x_min", "x_max")
    hit = [chunk_id for chunk_id, sid, lo, hi in bounds if any(lo <= x <= hi for x in xs_of[sid])]
    if not hit:
        return 0
    deleted = 0
    new: list[SeriesChunk] = []
    gone: list[int] = []
    for chunk in SeriesChunk.objects.filter(id__in=hit).only("id", "series_id", "level", "data"):
        xs, ys = decode(chunk.data)
        keep = ~np.isin(xs, np.fromiter(xs_of[chunk.series_id], dtype=np.float64))
        if keep.all():
            continue
        gone.append(chunk.id)
        deleted += int((~keep).sum())
        if keep.any():
            new.append(_chunk(chunk.series_id, chunk.level, xs[keep], ys[keep]))
    SeriesChunk.objects.bulk_create(new)
    SeriesChunk.objects.filter(id__in=gone).delete()
    return deleted


def _chunk(series_id: int, level: int, xs: Floats, ys: Floats) -> SeriesChunk:
    return SeriesChunk(
        series_id=series_id,
        level=level,
        count=len(xs),
        x_min=float(xs[0]),
        x_max=float(xs[-1]),
        y_min=float(ys.min()),
        y_max=float(ys.max()),
        data=encode(xs, ys),
        summary=encode(*summary(xs, ys)),
    )
