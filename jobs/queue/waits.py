"""How long jobs like this one waited in the queue, from the portal's own records.

"Like this one": same cluster and partition (blank is the cluster's default), same
nodes and GPUs per node, submitted in the last WAIT_WINDOW. The wait of an attempt is
submitted_at (sbatch accepted it) to started_at (Slurm started it). One query reads the
latest MAX_WAIT_SAMPLES waits of each cluster asked about (a UNION ALL of one index-ordered,
limited scan per cluster); median and p90 are interpolated as percentile_cont does.
"""

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import DurationField, ExpressionWrapper, F

from jobs.models import Attempt

WAIT_WINDOW = timedelta(weeks=4)
MAX_WAIT_SAMPLES = 500
# Fewer similar jobs than this say too little to show a median for.
MIN_WAIT_SAMPLES = 3


@dataclass(frozen=True)
class WaitHistory:
    nodes: int
    gpus_per_node: int
    partition: str  # blank: the cluster's default
    count: int
    median: timedelta | None
    p90: timedelta | None

    @property
    def spec_text(self) -> str:
        where = self.partition or "the default partition"
        nodes = f"{self.nodes} node{'s' if self.nodes != 1 else ''}"
        gpus = f"{self.gpus_per_node} GPU{'s' if self.gpus_per_node != 1 else ''}"
        return f"{nodes} x {gpus} on {where}"

    @property
    def typical(self) -> str:
        """E.g. "3 min median, 20 min p90 over 41 jobs", or why there is no figure."""
        if self.median is None or self.p90 is None:
            count = "none" if not self.count else f"only {self.count}"
            return f"{count} in the last 4 weeks, too few to tell"
        return (
            f"{format_wait(self.median)} median, {format_wait(self.p90)} p90 "
            f"over {self.count} job{'s' if self.count != 1 else ''}"
        )

    @property
    def text(self) -> str:
        """E.g. "similar jobs (2 nodes x 4 GPUs on gpu) waited 3 min median, 20 min p90 over 41
        jobs" (or why there is no figure)."""
        if self.median is None:
            return f"similar jobs ({self.spec_text}): {self.typical}"
        return f"similar jobs ({self.spec_text}) waited {self.typical}"


def percentile(ordered: list[float], fraction: float) -> float:
    """Linear interpolation between the closest ranks (PostgreSQL's percentile_cont)."""
    if not ordered:
        raise ValueError("percentile of no values")
    position = fraction * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def similar_waits(
    *, cluster_id: int, partition: str, nodes: int, gpus_per_node: int, now: datetime
) -> WaitHistory:
    """The waits of the latest MAX_WAIT_SAMPLES similar attempts that started."""
    return waits_by_cluster(
        cluster_ids=[cluster_id],
        partition=partition,
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        now=now,
    )[cluster_id]


def waits_by_cluster(
    *, cluster_ids: list[int], partition: str, nodes: int, gpus_per_node: int, now: datetime
) -> dict[int, WaitHistory]:
    """similar_waits for each cluster, in one query: where would this spec start sooner."""
    wait = ExpressionWrapper(F("started_at") - F("submitted_at"), output_field=DurationField())
    scans = [
        Attempt.objects.filter(
            job__cluster_id=cluster_id,
            job__partition=partition,
            job__nodes=nodes,
            job__gpus_per_node=gpus_per_node,
            submitted_at__gte=now - WAIT_WINDOW,
            started_at__isnull=False,
        )
        .annotate(wait=wait)
        .order_by("-submitted_at")
        .values_list("job__cluster_id", "wait")[:MAX_WAIT_SAMPLES]
        for cluster_id in dict.fromkeys(cluster_ids)
    ]
    if not scans:
        return {}
    rows = scans[0].union(*scans[1:], all=True) if len(scans) > 1 else scans[0]
    found: dict[int, list[float]] = {cluster_id: [] for cluster_id in cluster_ids}
    for cluster_id, waited in rows:
        if waited is not None:
            # A clock step can put a start before its submission: that job waited no time.
            found[cluster_id].append(max(waited.total_seconds(), 0.0))
    return {
        cluster_id: _history(sorted(seconds), partition, nodes, gpus_per_node)
        for cluster_id, seconds in found.items()
    }


def _history(seconds: list[float], partition: str, nodes: int, gpus_per_node: int) -> WaitHistory:
    median, p90 = _median_p90(seconds)
    return WaitHistory(
        nodes=nodes,
        gpus_per_node=gpus_per_node,
        partition=partition,
        count=len(seconds),
        median=median,
        p90=p90,
    )


def _median_p90(ordered: list[float]) -> tuple[timedelta | None, timedelta | None]:
    """Of seconds in order; (None, None) for fewer than MIN_WAIT_SAMPLES."""
    if len(ordered) < MIN_WAIT_SAMPLES:
        return None, None
    return timedelta(seconds=percentile(ordered, 0.5)), timedelta(seconds=percentile(ordered, 0.9))


def format_wait(wait: timedelta) -> str:
    """Rounded to what a person plans by: "under 1 min", "12 min", "3 h 5 min", "2 d 4 h"."""
    minutes = round(wait.total_seconds() / 60)
    if minutes < 1:
        return "under 1 min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"


# The cluster page's history: every partition's waits over the last week.
RECENT_WINDOW = timedelta(days=7)
MAX_RECENT_WAITS = 2000


@dataclass(frozen=True)
class PartitionWaits:
    partition: str  # blank: the cluster's default, where its name is not known
    count: int
    median: timedelta | None
    p90: timedelta | None
    points: list[tuple[datetime, float]]  # (submitted_at, seconds waited), oldest first

    @property
    def median_text(self) -> str:
        return format_wait(self.median) if self.median is not None else "too few to tell"

    @property
    def p90_text(self) -> str:
        return format_wait(self.p90) if self.p90 is not None else "too few to tell"


def recent_waits_by_partition(
    *, cluster_id: int, now: datetime, default_partition: str = ""
) -> list[PartitionWaits]:
    """The cluster's waits of the last RECENT_WINDOW per partition, by name, in one query.

    The latest MAX_RECENT_WAITS attempts that started; jobs that named no partition count
    as `default_partition`'s (the cluster's default, where the caller knows its name).
    """
    wait = ExpressionWrapper(F("started_at") - F("submitted_at"), output_field=DurationField())
    rows = (
        Attempt.objects.filter(
            job__cluster_id=cluster_id,
            submitted_at__gte=now - RECENT_WINDOW,
            started_at__isnull=False,
        )
        .annotate(wait=wait)
        .order_by("-submitted_at")
        .values_list("job__partition", "submitted_at", "wait")[:MAX_RECENT_WAITS]
    )
    found: dict[str, list[tuple[datetime, float]]] = {}
    for partition, submitted_at, waited in rows:
        if waited is not None and submitted_at is not None:
            seconds = max(waited.total_seconds(), 0.0)  # a clock step: it waited no time
            found.setdefault(partition or default_partition, []).append((submitted_at, seconds))
    return [_partition_waits(name, points[::-1]) for name, points in sorted(found.items())]


def _partition_waits(partition: str, points: list[tuple[datetime, float]]) -> PartitionWaits:
    median, p90 = _median_p90(sorted(waited for _, waited in points))
    return PartitionWaits(
        partition=partition, count=len(points), median=median, p90=p90, points=points
    )
