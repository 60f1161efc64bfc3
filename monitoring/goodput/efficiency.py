"""The efficiency card's arithmetic: per-GPU figures, where the GPU-hours went, the bottleneck.

Pure functions on plain values (`monitoring.goodput.card` reads the rows). The
GPU-hours of an attempt are split into parts that always sum to its charge:

- startup: from the start to the first step the portal saw;
- lost: work the next attempt redid, from the checkpoint it resumed from (this
  attempt's) to the end, or to where a hang began: the hung time after it is not
  work; all of the attempt after its first step if the next one resumed from an
  older attempt's checkpoint or from scratch;
- hung and declared pauses: durations given by the hang detector (the end of the
  attempt) and the trainer's declared pauses (all of them, within the time between
  the first step and the lost work); taken to be idle time, so they come out of the
  idle part rather than on top of it;
- idle: per GPU, sample intervals under the idle threshold outside startup and lost;
- productive: the rest.

Queued time is shown beside them and never charged.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Points = Sequence[tuple[float, float]]
# A gap between two samples longer than this counts no more than this (a sampler that stopped).
MAX_SAMPLE_GAP_S = 30.0
# Memory of the GPU models the card knows, in MiB, for the memory-bound rule.
GPU_MEMORY_MIB = {"H200": 143771, "H100": 81559, "A100": 81920, "A100-40GB": 40960, "L40S": 46068}
MEMORY_BOUND_SHARE = 0.9
INPUT_BOUND_UTIL = 50.0
WAITING_SPREAD = 30.0  # points of mean utilisation between the busiest and the idlest GPU


@dataclass(frozen=True)
class GpuTrace:
    node: str
    index: int
    utilization: Points = ()
    memory_mib: Points = ()
    power_w: Points = ()


@dataclass(frozen=True)
class GpuFigures:
    node: str
    index: int
    mean_util: float | None
    p95_util: float | None
    peak_memory_mib: float | None
    energy_wh: float | None
    idle_seconds: float


@dataclass(frozen=True)
class Span:
    """The attempt's times, unix seconds (None where the portal never saw it)."""

    start: float
    end: float
    submitted: float | None = None
    first_step: float | None = None
    lost_from: float | None = None  # None: nothing of it is redone


@dataclass(frozen=True)
class Bottleneck:
    kind: str  # input_bound, memory_bound, waiting_on_ranks, none
    finding: str
    advice: str


@dataclass
class Card:
    gpus: int
    gpu_hours: float  # what the parts sum to: the ledger's charge when there is one
    queued_gpu_hours: float
    parts: dict[str, float]  # GPU-hours by part, in PARTS order
    per_gpu: list[GpuFigures] = field(default_factory=list)
    mean_mfu: float | None = None
    bottleneck: Bottleneck | None = None
    threshold_percent: int = 10

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


PARTS = ("startup", "productive", "declared_pauses", "hung", "idle", "lost")


def percentile(values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile (`share` 0.95 is p95)."""
    ordered = sorted(values)
    rank = max(math.ceil(share * len(ordered)), 1)
    return ordered[rank - 1]


def _intervals(points: Points, lo: float, hi: float) -> list[tuple[float, float, float]]:
    """Each sample's interval (until the next one, capped), clipped to [lo, hi], with its value."""
    out = []
    for (x, y), (x_next, _) in zip(points, [*points[1:], (math.inf, 0.0)], strict=True):
        a, b = max(x, lo), min(x_next, x + MAX_SAMPLE_GAP_S, hi)
        if b > a:
            out.append((a, b, y))
    return out


def _overlap(a: float, b: float, windows: Sequence[tuple[float, float]]) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for lo, hi in windows)


def energy_wh(power: Points) -> float | None:
    """Trapezoids between samples (gaps capped), in watt-hours."""
    if len(power) < 2:
        return None
    joules = 0.0
    for (x0, y0), (x1, y1) in itertools.pairwise(power):
        joules += min(x1 - x0, MAX_SAMPLE_GAP_S) * (y0 + y1) / 2
    return joules / 3600


def gpu_figures(
    trace: GpuTrace, *, span: Span, threshold: float, excluded: Sequence[tuple[float, float]]
) -> GpuFigures:
    utils = [y for _, y in trace.utilization]
    idle = 0.0
    for a, b, y in _intervals(trace.utilization, span.start, span.end):
        if y < threshold:
            idle += (b - a) - _overlap(a, b, excluded)
    return GpuFigures(
        node=trace.node,
        index=trace.index,
        mean_util=sum(utils) / len(utils) if utils else None,
        p95_util=percentile(utils, 0.95) if utils else None,
        peak_memory_mib=max((y for _, y in trace.memory_mib), default=None),
        energy_wh=energy_wh(trace.power_w),
        idle_seconds=max(idle, 0.0),
    )


def _bounds(span: Span, hung_seconds: float = 0.0) -> tuple[float, float, float, float, float]:
    """start, first step, start of the lost work, start of the hang, end: ordered, within
    the span. A hang ends the attempt, so the lost work stops where it begins."""
    start, end = span.start, max(span.end, span.start)
    first = end if span.first_step is None else min(max(span.first_step, start), end)
    hung_from = max(end - max(hung_seconds, 0.0), first)
    lost_from = hung_from if span.lost_from is None else min(max(span.lost_from, first), hung_from)
    return start, first, lost_from, hung_from, end


def excluded_windows(span: Span, hung_seconds: float = 0.0) -> list[tuple[float, float]]:
    """Startup and lost time: counted there, so never as idle too."""
    start, first, lost_from, hung_from, _ = _bounds(span, hung_seconds)
    return [(start, first), (lost_from, hung_from)]


def split_gpu_hours(
    *,
    total_gpu_hours: float,
    gpus: int,
    span: Span,
    idle_gpu_seconds: float,
    declared_pause_seconds: float = 0.0,
    hung_seconds: float = 0.0,
) -> dict[str, float]:
    """The attempt's GPU-hours by part; they sum to `total_gpu_hours` (see the module)."""
    start, first, lost_from, hung_from, end = _bounds(span, hung_seconds)
    wall = {
        "startup": first - start,
        "lost": hung_from - lost_from,
        "hung": end - hung_from,
        # A trainer's claim: never more than the time it could have paused in.
        "declared_pauses": min(max(declared_pause_seconds, 0.0), lost_from - first),
    }
    gpu_seconds = {part: seconds * gpus for part, seconds in wall.items()}
    waits = gpu_seconds["hung"] + gpu_seconds["declared_pauses"]
    gpu_seconds["idle"] = max(idle_gpu_seconds - waits, 0.0)
    measured = sum(gpu_seconds.values())
    total_s = max(total_gpu_hours, 0.0) * 3600
    # The ledger (sacct's elapsed) may be a little shorter than the portal's span.
    scale = total_s / measured if measured > total_s else 1.0
    hours = {part: seconds * scale / 3600 for part, seconds in gpu_seconds.items()}
    hours["productive"] = max(total_gpu_hours - sum(hours.values()), 0.0)
    return {part: hours[part] for part in PARTS}


def find_bottleneck(
    figures: Sequence[GpuFigures], *, memory_total_mib: float | None, stepped: bool
) -> Bottleneck:
    """The likely bottleneck, with the seed article's advice on data, memory and sync."""
    means = [(f.mean_util, f) for f in figures if f.mean_util is not None]
    if len(means) > 1:
        (low, idlest), (high, _) = min(means, key=lambda m: m[0]), max(means, key=lambda m: m[0])
        if high - low >= WAITING_SPREAD:
            return Bottleneck(
                "waiting_on_ranks",
                f"GPU {idlest.index} on {idlest.node} averaged {low:.0f} % while the busiest "
                f"averaged {high:.0f} %: every step waits for the slowest rank's gradients.",
                "Gradient sync makes every rank wait for the slowest: look at the straggler "
                "finding and that node (drain a sick one), and give every rank the same "
                "amount of work (shards, sequence lengths).",
            )
    peaks = [f.peak_memory_mib for f in figures if f.peak_memory_mib is not None]
    if memory_total_mib and peaks and max(peaks) >= MEMORY_BOUND_SHARE * memory_total_mib:
        return Bottleneck(
            "memory_bound",
            f"Peak memory {max(peaks):.0f} MiB of {memory_total_mib:.0f} MiB: the GPUs are "
            "near full, which forces small batches and waiting.",
            "Shard parameters and optimizer state (FSDP, DeepSpeed ZeRO), use activation "
            "checkpointing or mixed precision, and load checkpoints with map_location='cpu' "
            "before moving them to the GPU.",
        )
    if means and stepped and sum(m for m, _ in means) / len(means) < INPUT_BOUND_UTIL:
        mean = sum(m for m, _ in means) / len(means)
        return Bottleneck(
            "input_bound",
            f"The GPUs averaged {mean:.0f} % while the job made steps: they wait for data.",
            "Feed them faster: more DataLoader workers (num_workers, with pin_memory and "
            "prefetching), and the dataset cached on local NVMe or in memory instead of "
            "read from remote storage every epoch (object store -> local cache -> memory "
            "prefetch -> GPU).",
        )
    return Bottleneck("none", "The GPUs were busy: no bottleneck stands out.", "")


def memory_total_for(gpu_model: str) -> float | None:
    """The GPU memory of a cluster's GPU model name (`NVIDIA H200` -> 143771 MiB), if known."""
    words = gpu_model.upper().replace("NVIDIA", "").split()
    for word in sorted(words, key=len, reverse=True):
        if word in GPU_MEMORY_MIB:
            return GPU_MEMORY_MIB[word]
    return None


def build_card(
    *,
    traces: Sequence[GpuTrace],
    span: Span,
    gpus: int,
    total_gpu_hours: float,
    threshold_percent: int,
    mfu: Sequence[float] = (),
    memory_total_mib: float | None = None,
    declared_pause_seconds: float = 0.0,
    hung_seconds: float = 0.0,
) -> Card:
    """The card of an ended attempt; hung and declared pauses come from their detectors."""
    excluded = excluded_windows(span, hung_seconds)
    figures = [
        gpu_figures(t, span=span, threshold=threshold_percent, excluded=excluded) for t in traces
    ]
    parts = split_gpu_hours(
        total_gpu_hours=total_gpu_hours,
        gpus=gpus,
        span=span,
        idle_gpu_seconds=sum(f.idle_seconds for f in figures),
        declared_pause_seconds=declared_pause_seconds,
        hung_seconds=hung_seconds,
    )
    queued = max(span.start - span.submitted, 0.0) if span.submitted is not None else 0.0
    return Card(
        gpus=gpus,
        gpu_hours=total_gpu_hours,
        queued_gpu_hours=queued * gpus / 3600,
        parts=parts,
        per_gpu=figures,
        mean_mfu=sum(mfu) / len(mfu) if mfu else None,
        bottleneck=find_bottleneck(
            figures, memory_total_mib=memory_total_mib, stepped=span.first_step is not None
        ),
        threshold_percent=threshold_percent,
    )
