"""One value per step in a series: the newest. The rule, on points in arrival order (pure).

A step can be given twice: a tqdm bar's redraw read while it ran, then its final state;
a step whose lines came in two polls and whose later line gave a name again; a trainer
that restarts from a checkpoint inside the same job and prints its steps again. A chart
shows one value per step, so the store keeps one: the last one given. Within one poll
this drops the earlier points; `monitoring.series.overwrite` deletes what an earlier
poll stored.
"""

from collections.abc import Iterable
from operator import itemgetter

Point = tuple[int, str, float, float]  # attempt id, series name, x (the step), y
_KEY = itemgetter(0, 1, 2)


def newest_per_step(points: Iterable[Point]) -> list[Point]:
    """The last point of each (attempt, name, x), in the order those last points came."""
    points = list(points)
    if len(set(map(_KEY, points))) == len(points):
        return points  # the usual poll: no step given twice (a set built in C, not a loop)
    kept: dict[tuple[int, str, float], Point] = {}
    for point in points:
        key = point[:3]
        kept.pop(key, None)  # re-inserted: the order is that of the newest
        kept[key] = point
    return list(kept.values())
