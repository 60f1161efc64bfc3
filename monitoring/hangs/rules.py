"""Whether a running attempt is hung, and which rank stopped first: pure functions.

An attempt is hung when no rank has made a step (or left a declared pause), and its
output has given no new step, for longer than its own pace allows: `multiple` times
its recent step interval, and never less than `floor` seconds. One that reaches no
first step from any source within `startup` seconds of starting is a startup stall
(rendezvous, data loading).

The rank that stopped first is the one whose heartbeat thread stopped ticking
(a stopped or wedged process; the others still tick while they wait for it in
a collective), else the one with the lowest step, the oldest step time first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import median
from typing import Any

HANG, STARTUP = "hang", "startup"
PACE_SAMPLES = 16  # (time, step) samples of the furthest rank kept for the interval
# A rank whose "alive" time is older than this many ticks is stopped, not waiting.
STALE_TICKS = 5.0
TICK_SECONDS = 1.0  # portal_metrics.TICK_SECONDS


@dataclass(frozen=True)
class HangPolicy:
    multiple: float = 10.0
    floor: float = 300.0
    startup: float = 1800.0
    stack_wait: float = 15.0
    max_pause: float = 3600.0

    @classmethod
    def from_settings(
        cls, values: Mapping[str, Any], *, multiple: Any, floor: Any, startup: Any
    ) -> HangPolicy:
        """The portal's policy (settings.HANG_POLICY) with the job spec's own values over it."""
        known = {k: float(v) for k, v in values.items() if k in cls.__dataclass_fields__}
        policy = cls(**known)
        return cls(
            multiple=float(multiple) if multiple else policy.multiple,
            floor=float(floor) if floor else policy.floor,
            startup=float(startup) if startup else policy.startup,
            stack_wait=policy.stack_wait,
            max_pause=policy.max_pause,
        )


@dataclass(frozen=True)
class RankProgress:
    rank: int
    node: str = ""
    step: int | None = None
    step_at: float | None = None  # when it recorded `step`
    alive_at: float | None = None  # its heartbeat thread's last tick (None: no thread, a log)
    pause: str = ""  # the declared pause it is in, if any
    pause_since: float | None = None
    resumed_at: float | None = None  # when its last declared pause ended
    paused: float = 0.0  # seconds in its declared pauses that have ended (the current not)

    @property
    def active_at(self) -> float | None:
        """The last time it showed progress: a step, or the end of a declared pause."""
        times = [t for t in (self.step_at, self.resumed_at) if t is not None]
        return max(times) if times else None


@dataclass(frozen=True)
class Verdict:
    kind: str = ""  # "", HANG or STARTUP
    quiet: float = 0.0  # seconds without progress on any rank
    threshold: float = 0.0
    culprit: RankProgress | None = None
    last_step: int | None = None
    why: str = ""


def step_interval(pace: Sequence[Sequence[float]]) -> float | None:
    """The attempt's recent seconds per step: the median over its (time, step) samples."""
    rates = []
    for (t0, s0), (t1, s1) in pairwise(pace):
        if s1 > s0 and t1 >= t0:
            rates.append((t1 - t0) / (s1 - s0))
    return median(rates) if rates else None


def pace_add(
    pace: list[list[float]],
    ranks: Sequence[RankProgress],
    *,
    output_step: int | None = None,
    now: float = 0.0,
) -> list[list[float]]:
    """`pace` with the furthest step's (time, step), if it moved on: the furthest rank's, or
    a higher step the job's output gave (`output_step`, timed when this poll read it)."""
    stepped = [r for r in ranks if r.step is not None and r.step_at is not None]
    sample = None
    if stepped:
        top = max(stepped, key=lambda r: (r.step or 0, r.step_at or 0.0))
        sample = [float(top.step_at or 0.0), float(top.step or 0)]
    if output_step is not None and (sample is None or output_step > sample[1]):
        sample = [now, float(output_step)]
    if sample is None or (pace and pace[-1][1] >= sample[1]):
        return pace
    return [*pace, sample][-PACE_SAMPLES:]


def threshold(policy: HangPolicy, interval: float | None) -> float:
    return max(policy.floor, policy.multiple * interval) if interval else policy.floor


def is_ticking(r: RankProgress, now: float) -> bool:
    """Whether the rank's heartbeat thread still runs (it waits, it is not stopped)."""
    return r.alive_at is not None and now - r.alive_at <= STALE_TICKS * TICK_SECONDS


def culprit(ranks: Sequence[RankProgress], now: float) -> RankProgress | None:
    """The rank that stopped first: a stopped heartbeat, then the lowest step, oldest first."""
    if not ranks:
        return None

    def key(r: RankProgress) -> tuple[int, int, float, float]:
        ticking = is_ticking(r, now)
        step = r.step if r.step is not None else -1
        return (int(ticking), step, r.active_at or 0.0, r.alive_at or 0.0)

    return min(ranks, key=key)


def _paused(ranks: Sequence[RankProgress], now: float, policy: HangPolicy) -> RankProgress | None:
    """A rank in a declared pause, while no heartbeat has stopped (a stopped rank inside a
    checkpoint, and the others waiting for it inside theirs, is still a hang)."""
    if any(r.alive_at is not None and not is_ticking(r, now) for r in ranks):
        return None
    for r in ranks:
        if r.pause and r.pause_since is not None and now - r.pause_since <= policy.max_pause:
            return r
    return None


def _name(r: RankProgress) -> str:
    return f"rank {r.rank}" + (f" on node {r.node}" if r.node else "")


def hang_verdict(
    *,
    ranks: Sequence[RankProgress],
    now: float,
    started_at: float,
    pace: Sequence[Sequence[float]],
    policy: HangPolicy,
    records: bool = False,
) -> Verdict:
    """Whether the attempt is hung or stalled at startup, and whom to blame.

    `pace` holds the furthest step any source gave (a rank, or the job's output): its
    newest sample is progress as much as a rank's step is. `records`: the output's steps
    are the reader's count of step-less records (0 first), not steps it printed.
    """
    active = [r.active_at for r in ranks if r.active_at is not None]
    if pace:
        active.append(pace[-1][0])
    if not pace and not any(r.step is not None for r in ranks):
        quiet = now - max([started_at, *active])
        if quiet <= policy.startup or _paused(ranks, now, policy):
            return Verdict(quiet=quiet, threshold=policy.startup)
        return Verdict(
            STARTUP,
            quiet,
            policy.startup,
            why=f"No first step, on any rank or in its output, {quiet:.0f} s after the job started "
            f"(the startup window is {policy.startup:.0f} s): rendezvous or data loading "
            "may be stuck.",
        )
    # One step seen so far: the time it took from the start stands for the interval.
    interval = step_interval(pace) or (pace[-1][0] - started_at if pace else None)
    limit = threshold(policy, interval)
    quiet = now - max(active, default=started_at)
    paused = _paused(ranks, now, policy)
    if quiet <= limit or paused is not None:
        return Verdict(quiet=quiet, threshold=limit)
    first = culprit(ranks, now)
    steps = [r.step for r in ranks if r.step is not None]
    last = max([*steps, int(pace[-1][1])] if pace else steps)
    limits = f"for {quiet:.0f} s (this job's limit: {limit:.0f} s)"
    if ranks:
        why = f"No step on any rank {limits}; the last step was {last}."
        if first:
            why += f" {_name(first).capitalize()} stopped first (at step {first.step})."
    elif records:
        why = f"No new record in its output {limits}; it printed {last + 1} records, no steps."
    else:
        why = f"No step in its output {limits}; the last step was {last}."
    return Verdict(HANG, quiet, limit, culprit=first, last_step=last, why=why)
