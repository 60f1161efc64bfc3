"""Right-sizing from history: what past runs of the same command say about the next one.

"The same command": the same project, the same template and the same command text once
white space is collapsed (leading and trailing space dropped, every run of spaces, tabs
and newlines one space; a browser's CRLF and a re-indented line still match, another flag
value does not). The submitter's own runs if there are at least MIN_RUNS of them, else
everyone's in the project (theirs included). Clusters are not told apart (a cluster names
one GPU model; the basis says how many runs it rests on).

A past run is an attempt that ran to its end or to its time limit (COMPLETED, TIMEOUT)
in the last WINDOW, newest MAX_RUNS first. Its run time is the ledger's elapsed time
(sacct's) when charged, else the portal's start to end. Its GPUs are its efficiency
card's (monitoring.goodput.card): a GPU is busy when its mean utilisation reached the
card's idle threshold (the project's idle policy), the same threshold that counted its
idle time, and counted only when the card has each of its GPUs; its peak GPU memory is
the card's too.

What it gives, only from at least MIN_RUNS runs and always with its basis:
- a time limit: the p95 of their run times (interpolated, as jobs.queue.waits) plus
  MARGIN, rounded up to a step a person plans by;
- a warning when the time limit asked is LONG_LIMIT times that p95 or more, naming both
  (unless timed-out runs reach the p95: then the runs needed longer than they had, and
  the p95 is no upper bound);
- a warning when the GPUs asked are more than any past run with as many GPUs or more kept
  busy, with the GPU count they did keep busy;
- the peak GPU memory and the busy GPUs' mean utilisation, as facts.

Not given: host memory (the form's memory field) from past peaks, which the portal does
not record; and a less powerful GPU model, which would need each model's relative
speed, which the portal does not know (a cluster records one model name as text).
"""

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q

from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.waits import format_wait, percentile

MIN_RUNS = 3  # fewer runs say too little to size from
MAX_RUNS = 200  # the newest matching attempts read (one query)
# Rows read for them: commands with the same longest words but other text are rare.
LIKE_SLACK = 4
PREFILTER_WORDS = 8
WINDOW = timedelta(days=180)
SHARE = 0.95
MARGIN = 0.25  # on top of the p95
LONG_LIMIT = 5.0  # a time limit this many times the p95 or more is far above past runs
ENDED = (State.COMPLETED, State.TIMEOUT)
# Rounding steps for a suggested time limit: (up to, step).
STEPS = (
    (timedelta(hours=1), timedelta(minutes=5)),
    (timedelta(hours=6), timedelta(minutes=15)),
    (timedelta.max, timedelta(hours=1)),
)


def collapsed(command: str) -> str:
    """The command as runs are matched by it (see the module)."""
    return " ".join(command.split())


@dataclass(frozen=True)
class PastRun:
    """One ended attempt of the same command."""

    attempt_id: int
    user_id: int
    seconds: float  # its run time
    timed_out: bool
    gpus: int  # what it asked for
    busy_gpus: int | None  # None: no efficiency card (or no GPU samples)
    peak_memory_mib: float | None
    busy_util: tuple[float, ...] = ()  # the busy GPUs' mean utilisation, percent


@dataclass(frozen=True)
class History:
    runs: tuple[PastRun, ...]
    mine: bool  # the submitter's own runs (else the project's)
    project: str  # the project's slug, for the basis


@dataclass(frozen=True)
class SizingWarning:
    kind: str  # time_limit, idle_gpus
    text: str


@dataclass(frozen=True)
class Sizing:
    """What the history says; `basis` is why, `message` why there is nothing when so."""

    runs: int
    mine: bool
    message: str = ""
    p95: timedelta | None = None
    time_limit: timedelta | None = None  # suggested
    basis: str = ""
    gpus: int | None = None  # suggested total GPUs, when fewer than asked would do
    facts: tuple[str, ...] = ()
    warnings: tuple[SizingWarning, ...] = field(default_factory=tuple)


def _card_gpus(data: Any, gpus: int) -> tuple[int | None, float | None, tuple[float, ...]]:
    """Busy GPUs, peak memory and the busy GPUs' utilisation, from a stored card's data.

    The busy count only when the card has a utilisation for each of the run's `gpus`: a
    node whose sampler wrote nothing says nothing of its GPUs' use.
    """
    if not isinstance(data, dict) or not data.get("per_gpu"):
        return None, None, ()
    threshold = float(data.get("threshold_percent") or 0)
    figures = [g for g in data["per_gpu"] if isinstance(g, dict)]
    utils = [g["mean_util"] for g in figures if isinstance(g.get("mean_util"), int | float)]
    busy = tuple(float(u) for u in utils if u >= threshold)
    peaks = [
        g["peak_memory_mib"] for g in figures if isinstance(g.get("peak_memory_mib"), int | float)
    ]
    return (len(busy) if len(utils) >= gpus else None), max(peaks, default=None), busy


def _longest_words(command: str) -> list[str]:
    return sorted(set(command.split()), key=lambda word: (-len(word), word))[:PREFILTER_WORDS]


def past_runs(
    *, project_id: int, project: str, user_id: int, template: str, command: str, now: datetime
) -> History:
    """The runs the sizing rests on (one query; see the module for which)."""
    wanted = collapsed(command)
    rows = (
        Attempt.objects.filter(
            job__project_id=project_id,
            job__template=template,
            state__in=ENDED,
            started_at__isnull=False,
            ended_at__gte=now - WINDOW,
        )
        # Its longest words first: LIKEs, cheap in any database; the collapsed text is then
        # compared here, on the few commands that have them all (SQLite, the local run's
        # database, has no regular-expression replace).
        .filter(*[Q(job__command__contains=word) for word in _longest_words(command)])
        .order_by("-ended_at", "-pk")
        .values_list(
            "job__command",
            "pk",
            "job__user_id",
            "state",
            "started_at",
            "ended_at",
            "usage_charge__elapsed_seconds",
            F("job__nodes") * F("job__gpus_per_node"),
            "efficiency__data",
        )[: MAX_RUNS * LIKE_SLACK]
    )
    same = [row[1:] for row in rows if collapsed(row[0]) == wanted][:MAX_RUNS]
    runs = []
    for pk, user, state, started, ended, elapsed, gpus, card in same:
        seconds = float(elapsed) if elapsed is not None else (ended - started).total_seconds()
        busy, peak, utils = _card_gpus(card, gpus)
        runs.append(
            PastRun(pk, user, max(seconds, 0.0), state == State.TIMEOUT, gpus, busy, peak, utils)
        )
    mine = tuple(run for run in runs if run.user_id == user_id)
    if len(mine) >= MIN_RUNS:
        return History(mine, mine=True, project=project)
    return History(tuple(runs), mine=False, project=project)


def rounded_up(limit: timedelta) -> timedelta:
    """Up to the next step a person plans by: 5 min under an hour, 15 min to 6 h, else 1 h."""
    step = next(step for upto, step in STEPS if limit <= upto)
    return step * max(math.ceil(limit / step), 1)


def _runs_text(count: int, history: History) -> str:
    runs = f"{count} past run{'s' if count != 1 else ''}"
    return f"your {runs}" if history.mine else f"{runs} in {history.project}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _time_limit(
    history: History, asked: timedelta
) -> tuple[timedelta, timedelta, str, list[SizingWarning]]:
    runs = history.runs
    seconds = sorted(run.seconds for run in runs)
    p95 = timedelta(seconds=percentile(seconds, SHARE))
    suggested = rounded_up(p95 * (1 + MARGIN))
    who = _runs_text(len(runs), history)
    basis = (
        f"p95 of {who}: {format_wait(p95)}; suggested {format_wait(suggested)} "
        f"(+{MARGIN:.0%}, rounded up)."
    )
    timed_out = [run.seconds for run in runs if run.timed_out]
    # A timed-out run needed longer than it had: a p95 it reaches is no upper bound.
    censored = bool(timed_out) and max(timed_out) >= p95.total_seconds()
    if timed_out:
        basis += (
            f" {_plural(len(timed_out), 'run')} of them hit the time limit: "
            f"{'they needed longer, so this may be short' if censored else 'under the p95'}."
        )
    warnings = []
    if not censored and p95 > timedelta(0) and asked >= p95 * LONG_LIMIT:
        warnings.append(
            SizingWarning(
                "time_limit",
                f"The time limit, {format_wait(asked)}, is {asked / p95:.1f} times the p95 of "
                f"{who} ({format_wait(p95)}): a limit near {format_wait(suggested)} reserves "
                "fewer GPU-hours and can start sooner (Slurm backfills short jobs).",
            )
        )
    return p95, suggested, basis, warnings


def _gpus(history: History, asked: int) -> tuple[int | None, list[str], list[SizingWarning]]:
    """The suggested GPUs (when fewer would do), facts on GPU use, and the warning."""
    facts = []
    peaks = [run.peak_memory_mib for run in history.runs if run.peak_memory_mib is not None]
    if peaks:
        facts.append(
            f"GPU memory peaked at {max(peaks) / 1024:.1f} GiB per GPU "
            f"over {_plural(len(peaks), 'run')}."
        )
    utils = [u for run in history.runs for u in run.busy_util]
    if utils:
        facts.append(f"Busy GPUs averaged {sum(utils) / len(utils):.0f} % utilisation.")
    as_big = [run for run in history.runs if run.busy_gpus is not None and run.gpus >= asked]
    if len(as_big) < MIN_RUNS:
        return None, facts, []
    busy = max(run.busy_gpus or 0 for run in as_big)
    if busy >= asked:
        return None, facts, []
    who = _runs_text(len(as_big), history)
    kept = (
        "left every GPU idle: does the command use the GPU?"
        if busy == 0
        else f"kept at most {_plural(busy, 'GPU')} busy: the others would sit idle."
    )
    text = f"You ask for {_plural(asked, 'GPU')}; {who} with {asked} or more {kept}"
    return (busy or None), facts, [SizingWarning("idle_gpus", text)]


def sizing(*, history: History, time_limit: timedelta, gpus: int) -> Sizing:
    """What `history` says of a run asking `time_limit` and `gpus` (pure; see the module)."""
    count = len(history.runs)
    if count < MIN_RUNS:
        found = "No past runs" if not count else f"Only {_plural(count, 'past run')}"
        return Sizing(
            runs=count,
            mine=history.mine,
            message=f"{found} of this command in {history.project} "
            f"(the last {WINDOW.days} days): {MIN_RUNS} are needed to size from.",
        )
    p95, suggested_limit, basis, limit_warnings = _time_limit(history, time_limit)
    suggested_gpus, facts, gpu_warnings = _gpus(history, gpus)
    return Sizing(
        runs=count,
        mine=history.mine,
        gpus=suggested_gpus,
        facts=tuple(facts),
        warnings=(*limit_warnings, *gpu_warnings),
        p95=p95,
        time_limit=suggested_limit,
        basis=basis,
    )


def gpu_shape(*, total: int, gpus_per_node: int) -> tuple[int, int]:
    """Nodes and GPUs per node for at least `total` GPUs, keeping the asked GPUs per node
    when one node cannot hold them (a job asks for nodes of one size)."""
    if total <= gpus_per_node:
        return 1, total
    return math.ceil(total / gpus_per_node), gpus_per_node
