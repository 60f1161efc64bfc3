"""How right Slurm's start estimates were on a cluster and partition, and the correction.

Slurm plans as if every running job used its whole time limit, so where jobs end early
its estimates run long, by about how early they end. The portal keeps each attempt's first
estimate with when it was read (jobs.queue.start_estimates) and its actual start; from the
latest of those on the same cluster and partition it learns one factor, the median of
actual wait over predicted wait, and scales a new estimate's wait by it. Estimates of a
start within MIN_PREDICTED_WAIT say "now" and are left as they are.

How accurate: the median and p90 absolute error of the corrected estimates over the same
history, each sample corrected by the factor learned from the others (leave one out), so
the figure shown is never fitted to the jobs it describes.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import median

from jobs.models import Attempt
from jobs.queue.waits import format_wait, percentile

HISTORY_WINDOW = timedelta(weeks=4)
MAX_SAMPLES = 200
# Fewer samples than this: no correction, Slurm's estimate as it is.
MIN_SAMPLES = 5
MIN_PREDICTED_WAIT = 60.0  # seconds
# A factor is kept within these bounds whatever a few odd samples say.
FACTOR_BOUNDS = (0.05, 3.0)


@dataclass(frozen=True)
class Sample:
    """One estimate: the wait Slurm predicted when it was read, and the wait there was."""

    predicted: float  # seconds
    actual: float


def factor_of(samples: Sequence[Sample]) -> float | None:
    """The median ratio of actual to predicted wait, or None with too few samples."""
    ratios = [s.actual / s.predicted for s in samples if s.predicted >= MIN_PREDICTED_WAIT]
    if len(ratios) < MIN_SAMPLES:
        return None
    low, high = FACTOR_BOUNDS
    return min(high, max(low, median(ratios)))


def corrected_wait(predicted: float, factor: float | None) -> float:
    """A predicted wait (seconds) scaled by the factor; a wait of about now stays as it is."""
    if factor is None or predicted < MIN_PREDICTED_WAIT:
        return max(0.0, predicted)
    return predicted * factor


@dataclass(frozen=True)
class StartHistory:
    """What past estimates on one cluster and partition teach."""

    samples: tuple[Sample, ...]
    factor: float | None
    median_error: float | None  # seconds, of the corrected estimates (leave one out)
    p90_error: float | None
    raw_median_error: float | None  # of Slurm's estimates as they were

    def correct(self, predicted: float) -> float:
        return corrected_wait(predicted, self.factor)

    @property
    def text(self) -> str:
        """E.g. "corrected from 23 past starts here: within 3 min for half, 9 min for 9 in 10"."""
        if self.factor is None or self.median_error is None or self.p90_error is None:
            count = len(self.samples)
            if not count:
                return "Slurm's own, uncorrected: no past estimates here yet"
            return (
                f"Slurm's own, uncorrected: {count} past estimate{'s' if count != 1 else ''} "
                f"here, {MIN_SAMPLES} needed"
            )
        alone = (
            f" (Slurm alone: {_within(self.raw_median_error)} for half)"
            if self.raw_median_error is not None
            else ""
        )
        return (
            f"corrected from {len(self.samples)} past starts here: "
            f"{_within(self.median_error)} for half, {_within(self.p90_error)} for 9 in 10{alone}"
        )


def _within(seconds: float) -> str:
    """E.g. "within 4 min"; "within 1 min" for less."""
    return f"within {format_wait(timedelta(seconds=max(seconds, 60.0)))}"


def history_of(samples: Sequence[Sample]) -> StartHistory:
    """The factor and the leave-one-out accuracy of a set of samples."""
    factor = factor_of(samples)
    if factor is None:
        return StartHistory(tuple(samples), None, None, None, None)
    errors = []
    for index, sample in enumerate(samples):
        others = factor_of([*samples[:index], *samples[index + 1 :]])
        errors.append(abs(corrected_wait(sample.predicted, others) - sample.actual))
    raw = sorted(abs(max(0.0, s.predicted) - s.actual) for s in samples)
    ordered = sorted(errors)
    return StartHistory(
        samples=tuple(samples),
        factor=factor,
        median_error=percentile(ordered, 0.5),
        p90_error=percentile(ordered, 0.9),
        raw_median_error=percentile(raw, 0.5),
    )


def start_history(*, cluster_id: int, partition: str, now: datetime) -> StartHistory:
    """The latest MAX_SAMPLES estimates of started attempts on the cluster and partition."""
    rows = (
        Attempt.objects.filter(
            job__cluster_id=cluster_id,
            job__partition=partition,
            first_estimate_read_at__gte=now - HISTORY_WINDOW,
            first_estimate_at__isnull=False,
            started_at__isnull=False,
        )
        .order_by("-first_estimate_read_at")
        .values_list("first_estimate_read_at", "first_estimate_at", "started_at")[:MAX_SAMPLES]
    )
    samples = [
        Sample(
            predicted=(estimate - read).total_seconds(),
            actual=max(0.0, (started - read).total_seconds()),
        )
        for read, estimate, started in rows
        if read and estimate and started  # the filter's; says so to the type checker
    ]
    return history_of(samples)
