"""Whether one alert rule fires on what one poll saw of an attempt: pure, no queries.

The poll hands over each attempt's new points; a NaN or infinite value is a point too (a
gap at its step, `monitoring.series.read`), and names the step where a watched series went
non-finite. The new log bytes are also scanned for `<series>=nan`-like text of the series
that rules watch (linear, bounded names), for output the reader gives no point for.
"""

import re
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from jobs.enums import FINAL_STATES, State
from monitoring.hangs.rules import HANG, STARTUP
from monitoring.models import AlertKind, AlertRule

RECENT = 32  # values kept per watched series for the throughput median
MIN_HISTORY = 5  # values before a drop can be judged
DEFAULT_MINUTES_LEFT = 10.0
DEFAULT_FACTOR = 2.0
MAX_SCANNED_NAMES = 32
SERIES, THRESHOLD, STEP, FACTOR = "series", "threshold", "step", "factor"
# The settings each kind reads in rule_fire: the form asks only for these, the rules page
# shows only these, and two rules of a kind alike in these (and in scope) are one rule.
KIND_SETTINGS: dict[str, tuple[str, ...]] = {
    AlertKind.LOSS_NONFINITE: (SERIES,),
    AlertKind.LOSS_ABOVE: (SERIES, THRESHOLD, STEP),
    AlertKind.THROUGHPUT_DROP: (SERIES, FACTOR),
    AlertKind.NO_PROGRESS: (),
    AlertKind.STARTED: (),
    AlertKind.ENDED: (),
    AlertKind.TIME_LIMIT: (THRESHOLD,),
}


@dataclass(frozen=True)
class Fire:
    message: str
    at_x: float | None = None


@dataclass
class AttemptView:
    """One attempt as this poll saw it."""

    job_name: str
    number: int
    state: str
    started_at: datetime | None
    time_limit: timedelta
    now: datetime
    points: dict[str, list[tuple[float, float]]] = field(default_factory=dict)  # finite
    gaps: dict[str, list[float]] = field(default_factory=dict)  # steps of NaN or inf values
    nonfinite: set[str] = field(default_factory=set)  # series printed as nan/inf
    recent: dict[str, list[float]] = field(default_factory=dict)  # before this poll
    last_x: float | None = None  # the latest training step (never a GPU sample's time)
    verdict: str = ""


_NONFINITE = re.compile(rb"(?<![\w.])[+-]?(?:nan|infinity|inf)(?![\w])", re.IGNORECASE)
MAX_NONFINITE_HITS = 10_000  # per chunk: a job printing more `nan`s only hides its own alert


def nonfinite_pattern(names: Iterable[str]) -> re.Pattern[bytes] | None:
    """What precedes a non-finite value of these names, reversed (matched from the value back).

    Covers `loss=nan`, `loss: inf`, `'loss': nan` (a Trainer dict), `"loss": NaN` (JSON
    from Python), nanoGPT's `loss nan` and Megatron's `lm loss: nan` for `lm_loss`.
    Matching backwards from each value costs the length of one name, not a scan of
    the line: the bytes are a job's output, and a line of `nan`s must stay cheap.
    """
    unique = sorted({n for n in names if n}, key=lambda n: (-len(n), n))[:MAX_SCANNED_NAMES]
    if not unique:
        return None
    alternatives = b"|".join(re.escape(n.encode()[::-1]).replace(b"_", rb"[_ ]") for n in unique)
    return re.compile(
        rb"(?:[ \t]{0,4}[:=][ \t]{0,4}|[ \t]{1,4})[\"']?(" + alternatives + rb")[\"']?(?![\w/.])",
        re.IGNORECASE,
    )


def nonfinite_series(
    pattern: re.Pattern[bytes] | None, data: bytes, names: Sequence[str]
) -> set[str]:
    """The watched names printed with a non-finite value in these bytes (case as watched)."""
    if pattern is None or not data:
        return set()
    lowered = data.lower()  # C speed: most output holds no nan/inf at all
    if b"nan" not in lowered and b"inf" not in lowered:
        return set()
    by_lower = {n.lower(): n for n in names}
    found: set[str] = set()
    backwards, end = data[::-1], len(data)
    for hits, value in enumerate(_NONFINITE.finditer(data)):
        if hits >= MAX_NONFINITE_HITS or len(found) == len(by_lower):
            break
        match = pattern.match(backwards, end - value.start())
        if match is not None:
            name = match.group(1)[::-1].decode(errors="replace").lower().replace(" ", "_")
            if name in by_lower:
                found.add(by_lower[name])
    return found


def recent_update(
    recent: dict[str, list[float]],
    points: dict[str, list[tuple[float, float]]],
    names: Iterable[str],
) -> dict[str, list[float]]:
    """The watched series' last RECENT values after this poll's points."""
    out = {}
    for name in names:
        values = list(recent.get(name, [])) + [y for _, y in points.get(name, [])]
        out[name] = values[-RECENT:]
    return out


def rule_settings(rule: AlertRule) -> dict[str, object]:
    """The settings the rule's kind reads, each as rule_fire takes it (its default filled in)."""
    defaults: dict[str, object] = {STEP: 0.0, FACTOR: DEFAULT_FACTOR}
    if rule.kind == AlertKind.TIME_LIMIT:
        defaults[THRESHOLD] = DEFAULT_MINUTES_LEFT
    out = {}
    for name in KIND_SETTINGS.get(rule.kind, ()):
        value = getattr(rule, name)
        value = value.strip() if isinstance(value, str) else value
        out[name] = defaults.get(name) if value is None or value == "" else value
    return out


def rule_settings_text(rule: AlertRule) -> str:
    """The kind's own settings in words: `above 2 after step 100`, `10 min left`."""
    settings = {k: _figure(v) for k, v in rule_settings(rule).items()}
    if rule.kind == AlertKind.LOSS_ABOVE:
        after = f" after step {settings[STEP]}" if rule.step else ""
        return f"above {settings[THRESHOLD]}{after}"
    if rule.kind == AlertKind.THROUGHPUT_DROP:
        return f"below its recent median / {settings[FACTOR]}"
    if rule.kind == AlertKind.TIME_LIMIT:
        return f"{settings[THRESHOLD]} min left"
    return ""


def _figure(value: object) -> str:
    return f"{value:g}" if isinstance(value, int | float) else str(value)


def _x(value: float | None, word: str = "at") -> str:
    return "" if value is None else f" {word} step {value:g}"


def rule_fire(rule: AlertRule, view: AttemptView) -> Fire | None:
    """Whether the rule fires for this attempt now, and with what message."""
    where = f"{view.job_name} (attempt {view.number})"
    kind = rule.kind
    if kind == AlertKind.LOSS_NONFINITE:
        if gaps := view.gaps.get(rule.series):
            step = min(gaps)
            return Fire(f"{where}: {rule.series} is NaN or infinite{_x(step)}", step)
        if rule.series in view.nonfinite:  # printed where the reader found no step for it
            return Fire(
                f"{where}: {rule.series} printed as NaN or infinite{_x(view.last_x, 'by')}",
                view.last_x,
            )
    elif kind == AlertKind.LOSS_ABOVE:
        bound, after = rule.threshold, rule.step or 0.0
        if bound is not None:
            for x, y in view.points.get(rule.series, []):
                if x >= after and y > bound:
                    return Fire(f"{where}: {rule.series} {y:g} above {bound:g}{_x(x)}", x)
    elif kind == AlertKind.THROUGHPUT_DROP:
        return _drop(rule, view, where)
    elif kind == AlertKind.NO_PROGRESS:
        if view.state == State.RUNNING and view.verdict in (HANG, STARTUP):
            return Fire(f"{where}: no progress ({view.verdict})", view.last_x)
    elif kind == AlertKind.STARTED:
        if view.started_at is not None:
            return Fire(f"{where} started", None)
    elif kind == AlertKind.ENDED:
        if view.state in FINAL_STATES:
            return Fire(f"{where} ended: {State(view.state).label}", view.last_x)
    elif kind == AlertKind.TIME_LIMIT:
        return _time_limit(rule, view, where)
    return None


def _drop(rule: AlertRule, view: AttemptView, where: str) -> Fire | None:
    factor = rule.factor or DEFAULT_FACTOR
    window = list(view.recent.get(rule.series, []))
    for x, y in view.points.get(rule.series, []):
        if len(window) >= MIN_HISTORY:
            median = statistics.median(window)
            if median > 0 and y < median / factor:
                return Fire(
                    f"{where}: {rule.series} {y:g} fell below its recent median "
                    f"{median:g} / {factor:g}{_x(x)}",
                    x,
                )
        window = [*window, y][-RECENT:]
    return None


def _time_limit(rule: AlertRule, view: AttemptView, where: str) -> Fire | None:
    if view.state != State.RUNNING or view.started_at is None:
        return None
    left = view.started_at + view.time_limit - view.now
    minutes = rule.threshold if rule.threshold is not None else DEFAULT_MINUTES_LEFT
    if timedelta(0) < left <= timedelta(minutes=minutes):
        return Fire(
            f"{where}: {int(left.total_seconds() // 60)} min left of its time limit", view.last_x
        )
    return None
