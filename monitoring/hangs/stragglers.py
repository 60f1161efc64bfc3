"""Stragglers and sick nodes of a running job, from the series the poll already stores.

Compared across the job, over a recent window, so one slow sample is noise and
a sustained gap is a finding:

- a GPU whose utilisation stays far below the other GPUs' median (`gpu/<node>/<i>/utilization`);
- a node whose own pace stays far below the other nodes' median (`steps_per_sec/<node>`,
  which the example trainer writes: each node's compute time per step, before it
  waits for the others, so a slow node shows even though DDP steps in lockstep);
- a GPU whose temperature stays at or above the hot threshold.
"""

import statistics
from dataclasses import dataclass, field

from django.conf import settings

from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import GPU_SERIES_PREFIX, gpu_series
from monitoring.reading.kinds import pace_node
from monitoring.series.read import last_points, series_read

_WATCHED_GPU_METRICS = ("utilization", "temperature")

UTILIZATION, STEP_RATE, HOT = "gpu_utilization", "step_rate", "gpu_hot"


@dataclass(frozen=True)
class StragglerPolicy:
    window_seconds: float = 60.0  # of GPU samples
    window_steps: int = 20  # of node pace points
    fraction: float = 0.5  # "far below": under this share of the other nodes' median
    sustained: float = 0.8  # share of the window's points that must be below (or hot)
    hot_celsius: float = 85.0
    min_points: int = 5

    @classmethod
    def from_settings(cls) -> "StragglerPolicy":
        # Read at call time, so tests and deployments can tune it.
        return cls(**getattr(settings, "STRAGGLER_POLICY", {}))


@dataclass(frozen=True)
class Straggler:
    kind: str
    node: str
    gpu: int | None
    value: float  # the flagged thing's median over the window
    reference: float  # the other nodes' (or GPUs') median, or the hot threshold
    message: str


@dataclass
class _Window:
    node: str
    gpu: int | None
    values: list[float] = field(default_factory=list)
    span: float = 0.0


def _below_median(
    windows: list[_Window], policy: StragglerPolicy, *, min_span: float
) -> list[tuple[_Window, float, float]]:
    """Windows whose values stay under `fraction` of the rest of the job's median.

    The median of the others (leaving the window itself out), so that with two
    nodes a slow one is compared with the fast one, not with their average.
    Returns (window, its median, the others' median).
    """
    usable = [w for w in windows if len(w.values) >= policy.min_points and w.span >= min_span]
    if len(usable) < 2:
        return []
    medians = [statistics.median(w.values) for w in usable]
    found = []
    for index, window in enumerate(usable):
        others = statistics.median(medians[:index] + medians[index + 1 :])
        if others <= 0:
            continue
        limit = policy.fraction * others
        below = sum(v < limit for v in window.values) / len(window.values)
        if medians[index] < limit and below >= policy.sustained:
            found.append((window, medians[index], others))
    return found


def find_stragglers(
    *,
    utilization: list[_Window],
    pace: list[_Window],
    temperature: list[_Window],
    policy: StragglerPolicy,
) -> list[Straggler]:
    """The findings for windows already read (pure: no database)."""
    found: list[Straggler] = []
    for window, own, job in _below_median(
        pace, policy, min_span=policy.sustained * (policy.window_steps - 1)
    ):
        found.append(
            Straggler(
                STEP_RATE,
                window.node,
                None,
                own,
                job,
                f"Node {window.node} keeps {own:.2f} steps/s on its own, against "
                f"{job:.2f} for the other nodes (median): it holds the whole job back.",
            )
        )
    for window, own, job in _below_median(
        utilization, policy, min_span=policy.sustained * policy.window_seconds
    ):
        found.append(
            Straggler(
                UTILIZATION,
                window.node,
                window.gpu,
                own,
                job,
                f"GPU {window.gpu} on node {window.node} runs at {own:.0f}% utilisation, against "
                f"{job:.0f}% for the job's other GPUs (median).",
            )
        )
    for window in temperature:
        if len(window.values) < policy.min_points:
            continue
        hot = sum(v >= policy.hot_celsius for v in window.values) / len(window.values)
        own = statistics.median(window.values)
        if hot >= policy.sustained:
            found.append(
                Straggler(
                    HOT,
                    window.node,
                    window.gpu,
                    own,
                    policy.hot_celsius,
                    f"GPU {window.gpu} on node {window.node} runs hot: {own:.0f} °C "
                    f"(threshold {policy.hot_celsius:.0f} °C); it may throttle its clocks.",
                )
            )
    return found


def _window(
    attempt_id: int, name: str, x_from: float | None, node: str, gpu: int | None
) -> _Window:
    data = series_read(attempt_id=attempt_id, name=name, x_from=x_from, max_points=10_000)
    span = (data.xs[-1] - data.xs[0]) if data.xs else 0.0
    return _Window(node=node, gpu=gpu, values=list(data.ys), span=span)


def attempt_stragglers(
    *, attempt: Attempt, policy: StragglerPolicy | None = None
) -> list[Straggler]:
    """Findings for a running attempt, over the recent window; none for one not running."""
    if attempt.state != State.RUNNING:
        return []
    return _stragglers(attempt, policy or StragglerPolicy.from_settings(), whole_run=False)


def persistent_stragglers(
    *, attempt: Attempt, policy: StragglerPolicy | None = None
) -> list[Straggler]:
    """Findings over an ended attempt's whole run: what stayed behind (or hot) for most of
    it, not for a recent minute (the node ledger's straggler signal)."""
    if not attempt.is_finished:
        return []
    return _stragglers(attempt, policy or StragglerPolicy.from_settings(), whole_run=True)


def _stragglers(attempt: Attempt, policy: StragglerPolicy, *, whole_run: bool) -> list[Straggler]:
    # A node's pace is what pace_node reads as one, as on the job page's pace chart: a name
    # it does not read (`steps_per_sec/n1/ema`) neither is a window nor moves the windows' end.
    rows = sorted(
        (name, x)
        for name, (x, _) in last_points(attempt_ids=[attempt.pk]).get(attempt.pk, {}).items()
        if name.startswith(GPU_SERIES_PREFIX) or pace_node(name) is not None
    )
    gpu_now = max((x for n, x in rows if n.startswith(GPU_SERIES_PREFIX)), default=0.0)
    pace_now = max((x for n, x in rows if pace_node(n) is not None), default=0.0)
    gpu_from = None if whole_run else gpu_now - policy.window_seconds
    pace_from = None if whole_run else pace_now - policy.window_steps + 1
    utilization, temperature, pace = [], [], []
    multi_node = attempt.job.nodes > 1
    for name, _last_x in rows:
        gpu = gpu_series(name)
        if gpu is not None and gpu.metric in _WATCHED_GPU_METRICS:
            window = _window(attempt.pk, name, gpu_from, gpu.node, gpu.index)
            if gpu.metric == "temperature":
                temperature.append(window)
            elif multi_node:
                utilization.append(window)
            continue
        node = pace_node(name)
        if node is not None and multi_node:
            pace.append(_window(attempt.pk, name, pace_from, node, None))
    return find_stragglers(
        utilization=utilization, pace=pace, temperature=temperature, policy=policy
    )
