"""The check of a user's extra stdout patterns (a job spec's `metric_patterns`).

Pure and at the jobs layer: the spec check refuses bad patterns at submit, and
monitoring (`monitoring.reading.user_patterns`) compiles only patterns that pass it.
User patterns run on RE2, whose matching time is linear in the line whatever the
pattern, so a pattern is refused for what RE2 cannot compile (backreferences,
lookarounds, possessive quantifiers), never for its shape.
"""

import re2

MAX_PATTERN_LENGTH = 500
MAX_PATTERNS = 20
# RE2's memory for one compiled pattern; a 500-character pattern needs far less
# unless it nests counted repetitions (`(a{100}){100}`), which this refuses.
MAX_PATTERN_MEMORY = 1 << 20

_HOW = (
    "use (?P<name>...) and (?P<value>...), or one group per metric "
    "such as (?P<loss>[-+.\\deE]+), optionally with (?P<step>\\d+)"
)


def _options() -> re2.Options:
    options = re2.Options()
    options.max_mem = MAX_PATTERN_MEMORY
    options.log_errors = False
    return options


def compile_pattern(pattern: str) -> re2._Regexp:
    """The RE2 program of a pattern; raises re2.error for one RE2 refuses."""
    return re2.compile(pattern, _options())


def _compile_error(exc: Exception) -> str:
    raw = exc.args[0] if exc.args else str(exc)
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def validate_pattern(pattern: str) -> str | None:
    """None if the pattern is usable as an extra stdout pattern, else what to change."""
    if not pattern.strip():
        return "The pattern is empty; enter a regular expression."
    if len(pattern) > MAX_PATTERN_LENGTH:
        return (
            f"The pattern is {len(pattern)} characters long; "
            f"shorten it to at most {MAX_PATTERN_LENGTH}."
        )
    try:
        compiled = compile_pattern(pattern)
    except re2.error as exc:
        return (
            f"The pattern cannot be compiled by RE2 ({_compile_error(exc)}); patterns run on "
            "RE2, which has no backreferences, lookarounds, atomic groups or possessive "
            "quantifiers, and nested repeat counts such as (a{100}){100} are limited to 1000 in "
            "all: rewrite it without them."
        )
    groups = set(compiled.groupindex)
    metrics = groups - {"step", "name", "value"}
    if not groups:
        return f"The pattern has no named groups; {_HOW}."
    if ("name" in groups) != ("value" in groups):
        return "The pattern needs both (?P<name>...) and (?P<value>...), or neither."
    if "value" in groups and metrics:
        return (
            "The pattern mixes name/value groups with per-metric groups "
            f"({', '.join(sorted(metrics))}); use one style."
        )
    return None


def pattern_lines(text: str) -> list[str]:
    """The patterns of a `metric_patterns` field: one per non-blank line, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip()]


def validate_patterns(text: str) -> list[str]:
    """Every problem with a `metric_patterns` field, each naming what to change."""
    patterns = pattern_lines(text)
    problems = []
    if len(patterns) > MAX_PATTERNS:
        problems.append(
            f"There are {len(patterns)} patterns; keep at most {MAX_PATTERNS} "
            "(one pattern can match several metrics with (?P<name>...) and (?P<value>...))."
        )
    for pattern in patterns[: MAX_PATTERNS + 1]:
        if problem := validate_pattern(pattern):
            problems.append(f"{pattern[:80]!r}: {problem}")
    return problems
