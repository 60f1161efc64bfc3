"""What each poll of a cluster took and met (duration, unreachable accounts), for /metrics.

Recorded by the poll task after every poll of a cluster, in the portal's health
figures (`portal_lib.health`); field names are made here only.
"""

import time
from dataclasses import dataclass

from jobs.poll.cycle import STATE, PollResult
from portal_lib.health import health_record


def _field(figure: str, cluster_id: int, part: str) -> str:
    # The state part keeps the names from before polls had parts.
    return f"poll:{cluster_id}:{figure}" if part == STATE else f"poll:{cluster_id}:{part}:{figure}"


@dataclass(frozen=True)
class PollFigures:
    polls: float = 0.0  # polls that ended, raised or not
    seconds: float = 0.0  # their durations added up
    ssh_errors: float = 0.0  # accounts (the portal's included) that could not be reached
    failures: float = 0.0  # polls, or accounts within one, that raised
    delayed: float = 0.0  # accounts left out for a slow or flooding login (jobs.poll.backoff)
    capped: float = 0.0  # accounts whose reply was cut at its output cap
    last_seconds: float | None = None
    last_end: float | None = None  # Unix time the last poll ended


def poll_record(
    *, cluster_id: int, seconds: float, result: PollResult | None, part: str = STATE
) -> None:
    """Count one poll of the cluster's part (jobs.poll.cycle.PARTS); `result` None: it raised."""
    add = {
        _field("polls", cluster_id, part): 1.0,
        _field("seconds", cluster_id, part): seconds,
        _field("ssh_errors", cluster_id, part): float(len(result.unreachable)) if result else 0.0,
        _field("failures", cluster_id, part): float(len(result.failed)) if result else 1.0,
        _field("delayed", cluster_id, part): float(len(result.delayed)) if result else 0.0,
        _field("capped", cluster_id, part): float(len(result.capped)) if result else 0.0,
    }
    last = {
        _field("last_seconds", cluster_id, part): seconds,
        _field("last_end", cluster_id, part): time.time(),
    }
    health_record(add=add, last=last)


def poll_figures(figures: dict[str, float], *, cluster_id: int, part: str = STATE) -> PollFigures:
    """The figures of the cluster's polls of one part, out of everything `health_read` returned."""
    return PollFigures(
        polls=figures.get(_field("polls", cluster_id, part), 0.0),
        seconds=figures.get(_field("seconds", cluster_id, part), 0.0),
        ssh_errors=figures.get(_field("ssh_errors", cluster_id, part), 0.0),
        failures=figures.get(_field("failures", cluster_id, part), 0.0),
        delayed=figures.get(_field("delayed", cluster_id, part), 0.0),
        capped=figures.get(_field("capped", cluster_id, part), 0.0),
        last_seconds=figures.get(_field("last_seconds", cluster_id, part)),
        last_end=figures.get(_field("last_end", cluster_id, part)),
    )
