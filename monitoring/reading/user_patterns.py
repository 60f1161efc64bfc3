"""A job's own stdout patterns (`metric_patterns`), compiled and matched on RE2.

RE2 matches in time linear in the line whatever the pattern, so a user's pattern
costs at most a few microseconds per kilobyte; patterns are checked by
`jobs.patterns` first, and only the first MAX_PATTERNS of a job are used (a job
submitted before the cap keeps working, with its first patterns).
"""

from functools import lru_cache
from typing import Any

from jobs.patterns import MAX_PATTERNS, compile_pattern, validate_pattern

# User patterns only ever see this much of a line: it bounds the output too.
MAX_USER_LINE_CHARS = 4096
MAX_NAME_LENGTH = 100
MAX_STEP_DIGITS = 18  # a step beyond int64 is not a step

Number = Any  # the parser's number reader: text -> float (nan and ±inf included) or None


@lru_cache(maxsize=256)
def user_pattern(pattern: str) -> Any:
    """The compiled pattern, or None for one the spec check would refuse."""
    return compile_pattern(pattern) if validate_pattern(pattern) is None else None


def user_patterns(patterns: list[str] | tuple[str, ...]) -> list[Any]:
    compiled = (user_pattern(text) for text in list(patterns)[:MAX_PATTERNS])
    return [pattern for pattern in compiled if pattern is not None]


def user_metrics(pattern: Any, line: str, number: Number) -> tuple[int | None, dict[str, float]]:
    """(step, metrics) that one user pattern finds on a line; `number` reads a value."""
    step: int | None = None
    values: dict[str, float] = {}
    for match in pattern.finditer(line[:MAX_USER_LINE_CHARS]):
        found = {key: text for key, text in match.groupdict().items() if text is not None}
        digits = found.pop("step", "").strip()
        if digits.isdigit() and len(digits) <= MAX_STEP_DIGITS:
            step = int(digits)
        if "value" in found:
            name = found.get("name", "").strip()
            found = {name: found["value"]} if 0 < len(name) <= MAX_NAME_LENGTH else {}
        for name, text in found.items():
            value = number(text)
            if value is not None:
                values[name] = value
    return step, values
