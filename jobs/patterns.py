"""The static check of a user's extra stdout pattern (a job spec's `metric_patterns`).

Pure and at the jobs layer: the spec check refuses a bad pattern at submit,
and monitoring's parser compiles only patterns that pass it.
"""

import re
from dataclasses import dataclass

MAX_PATTERN_LENGTH = 500

_QUANTIFIER = re.compile(r"(?:[*+?]|\{(\d*)(,?)(\d*)\})([+?]?)")


@dataclass
class _Group:
    repeats: bool = False  # holds a quantifier that can backtrack over many characters
    alternation: bool = False
    atomic: bool = False


def _group_header_end(pattern: str, i: int) -> int:
    """Index just past `(`, `(?:`, `(?P<name>`, `(?<=`, `(?i:`, ... starting at `(`."""
    i += 1
    if not pattern.startswith("?", i):
        return i
    i += 1
    if pattern.startswith("P<", i):
        return pattern.find(">", i) + 1
    if pattern.startswith(("<=", "<!"), i):
        return i + 2
    if pattern.startswith((":", "=", "!", ">"), i):
        return i + 1
    while i < len(pattern) and (pattern[i].isalpha() or pattern[i] == "-"):
        i += 1  # inline flags: (?i) or (?i:...)
    return i + 1 if pattern.startswith(":", i) else i


def _backtracking_hazard(pattern: str) -> str | None:
    """Why the (compiling) pattern can take exponential time, by its shape; None if it looks safe.

    Flags a repeated group that itself holds a repetition (`(a+)+`, `(\\w+\\s?)*`) or
    an alternation (`(a|ab)*`). Possessive quantifiers and atomic groups cannot
    backtrack, so they are allowed.
    """
    stack = [_Group()]
    closed: _Group | None = None  # the group that the next quantifier would apply to
    i = 0
    while i < len(pattern):
        char = pattern[i]
        quantified = closed
        closed = None
        if char == "\\":
            i += 2
        elif char == "[":
            i += 1
            if pattern.startswith("^", i):
                i += 1
            if pattern.startswith("]", i):
                i += 1
            while i < len(pattern) and pattern[i] != "]":
                i += 2 if pattern[i] == "\\" else 1
            i += 1
        elif char == "(":
            if pattern.startswith("(?#", i):
                i = pattern.find(")", i) + 1
                continue
            if pattern.startswith("(?P=", i):
                i = pattern.find(")", i) + 1
                continue
            stack.append(_Group(atomic=pattern.startswith("(?>", i)))
            i = _group_header_end(pattern, i)
            continue
        elif char == ")":
            group = stack.pop() if len(stack) > 1 else _Group()
            if not group.atomic and group.repeats:
                stack[-1].repeats = True
            closed = group
            i += 1
            continue
        elif char == "|":
            stack[-1].alternation = True
            i += 1
            continue
        else:
            match = _QUANTIFIER.match(pattern, i)
            if match and (match[0][0] != "{" or match[1] or match[3]):
                i = match.end()
                upper = match[3] if match[0][0] == "{" else None
                bounded_to_one = match[0][0] == "?" or (
                    match[0][0] == "{" and (upper == "1" or (not match[2] and match[1] in "01"))
                )
                if bounded_to_one or match[4] == "+":  # at most once, or possessive
                    continue
                if quantified is None or quantified.atomic:
                    stack[-1].repeats = True
                    continue
                if quantified.repeats:
                    return (
                        "has a repeated group that contains another repetition, like (a+)+, "
                        "which can take exponential time; remove one of the two repetitions, "
                        "or make the inner one possessive (a++) or atomic ((?>...))"
                    )
                if quantified.alternation:
                    return (
                        "repeats a group with alternatives, like (a|ab)*, which can take "
                        "exponential time; match the alternatives once, or use an atomic group"
                    )
                stack[-1].repeats = True
                continue
            i += 1
    return None


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
        compiled = re.compile(pattern)
    except re.error as exc:
        return f"The pattern does not compile: {exc.msg} at position {exc.pos}; fix the expression."
    groups = set(compiled.groupindex)
    metrics = groups - {"step", "name", "value"}
    how = (
        "use (?P<name>...) and (?P<value>...), or one group per metric "
        "such as (?P<loss>[-+.\\deE]+), optionally with (?P<step>\\d+)"
    )
    if not groups:
        return f"The pattern has no named groups; {how}."
    if ("name" in groups) != ("value" in groups):
        return "The pattern needs both (?P<name>...) and (?P<value>...), or neither."
    if "value" in groups and metrics:
        return (
            "The pattern mixes name/value groups with per-metric groups "
            f"({', '.join(sorted(metrics))}); use one style."
        )
    hazard = _backtracking_hazard(pattern)
    if hazard:
        return f"The pattern {hazard}."
    return None
