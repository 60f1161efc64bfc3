"""A node's score and verdict from its signals: pure, no Django.

Each signal adds its weight, halved every `half_life_hours` since it was recorded and
multiplied by `healthy_factor` for each healthy job the node ran since: a node that
failed once and has run ten jobs well since is healthy again, whatever the calendar.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

HEALTHY, SUSPECT, BAD = "healthy", "suspect", "bad"


@dataclass(frozen=True)
class Signal:
    weight: float
    at: datetime
    healthy_before: int  # the node's healthy jobs when the signal was recorded


@dataclass(frozen=True)
class ScorePolicy:
    half_life_hours: float = 72.0
    healthy_factor: float = 0.5
    suspect: float = 1.0
    bad: float = 2.5
    # A job's output names the node it blames: one person's jobs alone could print a fault
    # on a healthy node. Bad needs signals from this many people; one alone, suspect.
    bad_min_users: int = 1


def signal_value(signal: Signal, *, now: datetime, healthy_jobs: int, policy: ScorePolicy) -> float:
    """What one signal still weighs now."""
    hours = max((now - signal.at).total_seconds() / 3600, 0.0)
    by_time = 0.5 ** (hours / policy.half_life_hours) if policy.half_life_hours > 0 else 1.0
    since = max(healthy_jobs - signal.healthy_before, 0)
    return signal.weight * by_time * policy.healthy_factor**since


def node_score(
    signals: Iterable[Signal], *, now: datetime, healthy_jobs: int, policy: ScorePolicy
) -> float:
    return sum(signal_value(s, now=now, healthy_jobs=healthy_jobs, policy=policy) for s in signals)


def verdict(score: float, policy: ScorePolicy, users: int | None = None) -> str:
    """The verdict for a score whose signals came from `users` people (None: enough)."""
    if score >= policy.bad and (users is None or users >= policy.bad_min_users):
        return BAD
    if score >= min(policy.suspect, policy.bad):
        return SUSPECT
    return HEALTHY
