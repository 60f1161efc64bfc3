"""Which series the chosen runs log, for compare's series selector and its notes on runs
left out: the names in each run's summary (monitoring.runs.summary), one query."""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from monitoring.models import RunSummary
from monitoring.runs.summary import LOSS_NAMES


@dataclass(frozen=True)
class Offered:
    name: str
    runs: int  # how many of the chosen runs log it


def logged_series(*, job_ids: Sequence[int]) -> dict[int, list[str]]:
    """Each run's series names, sorted; a run without a summary yet has none."""
    rows = RunSummary.objects.filter(job_id__in=list(job_ids)).values_list("job_id", "metrics")
    return {job_id: sorted(metrics or {}) for job_id, metrics in rows}


def series_offered(logged: Mapping[int, Sequence[str]]) -> list[Offered]:
    """Every series any run logs, with how many runs log it, by name."""
    counts = Counter(name for names in logged.values() for name in names)
    return [Offered(name, runs) for name, runs in sorted(counts.items())]


def default_series(choices: Sequence[Offered]) -> str:
    """The series a compare opens on: the loss most of the runs log (by LOSS_NAMES' order
    among equals), else any loss, else the series most runs log; "loss" when none has any."""
    if not choices:
        return "loss"
    rank = {name: i for i, name in enumerate(LOSS_NAMES)}
    losses = [c for c in choices if c.name in rank] or [
        c for c in choices if "loss" in c.name.lower()
    ]
    pool = losses or list(choices)
    return min(pool, key=lambda c: (-c.runs, rank.get(c.name, len(rank)), c.name)).name
