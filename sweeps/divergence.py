"""Whether a trial's objective diverged: went NaN or infinite, or grew by orders of magnitude.

A diverged trial is pruned as such, whatever the pruner (a median pruner prunes nothing
before its start-up trials end, and a trial at 1e17 would otherwise complete and be
listed with that value). Pure: the tick hands it the values.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass

# Worse than the best so far by this many times the largest value seen (three orders of
# magnitude): a loss of 2 that reaches 1.6e6 diverged; a spike from 0.5 to 3 did not.
DIVERGE_FACTOR = 1000.0


@dataclass(frozen=True)
class Divergence:
    step: int
    value: float  # NaN or an infinity, or the finite value past the bound
    best: float | None  # the best value before it

    def note(self, metric: str) -> str:
        """What the trial's row says."""
        if not math.isfinite(self.value):
            # The series store keeps an infinity as NaN: both are a gap (monitoring.series.read).
            return f"Diverged at step {self.step}: {metric} is NaN or infinite."
        return (
            f"Diverged at step {self.step}: {metric} {self.value:.3g}, "
            f"orders of magnitude past its best {self.best:.3g}."
        )


def divergence(
    *, history: Iterable[float], points: Iterable[tuple[float, float]], maximize: bool
) -> Divergence | None:
    """The first of `points` (step, value; any order) that is not finite or is worse than
    the best so far by over DIVERGE_FACTOR times the largest magnitude so far; `history`
    holds the values seen before them."""
    seen = [value for value in history if math.isfinite(value)]
    best = (max(seen) if maximize else min(seen)) if seen else None
    scale = max((abs(value) for value in seen), default=0.0)
    for step, value in sorted(points, key=lambda point: point[0]):
        if not math.isfinite(value):
            return Divergence(int(step), value, best)
        if best is not None and scale > 0:
            worse = best - value if maximize else value - best
            if worse > DIVERGE_FACTOR * scale:
                return Divergence(int(step), value, best)
        best = value if best is None else (max(best, value) if maximize else min(best, value))
        scale = max(scale, abs(value))
    return None
