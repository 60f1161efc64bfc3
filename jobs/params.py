"""A run's settings: the parameter table, where each value came from, and its caps.

A job's `params` (JSON, GIN-indexed) is one flat table {key: value} whose values are
numbers, booleans or short strings; `param_sources` says where each key came from.
Three sources fill it, later ones winning a key: the command's `--key value` flags,
the `params` given at submit (API, client, form), and what the running code logs
with `portal_metrics.log_params(...)` (what really ran). Every source goes through
`params_clean`, so a tenant cannot make the table big: at most MAX_PARAMS keys of
MAX_KEY_CHARS, strings cut to MAX_VALUE_CHARS.
"""

import math
import re
import shlex
from collections.abc import Mapping
from typing import Any

ParamValue = float | int | bool | str

SOURCE_COMMAND = "command"
SOURCE_GIVEN = "given"
SOURCE_LOGGED = "logged"

MAX_PARAMS = 100
MAX_KEY_CHARS = 64
MAX_VALUE_CHARS = 200
_KEY = re.compile(r"^[A-Za-z_][\w.\-/]*$")
# Shell words after which the command's own arguments are over (a pipe, a redirect).
_SHELL_STOPS = frozenset({"|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1"})
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")


def param_value(raw: object) -> ParamValue | None:
    """A stored value: a finite number, a boolean or a string cut to MAX_VALUE_CHARS."""
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int):
        return raw if abs(raw) < 2**53 else float(raw)
    if isinstance(raw, float):
        return raw if math.isfinite(raw) else None
    if isinstance(raw, str):
        return raw.replace("\0", "")[:MAX_VALUE_CHARS]
    return None


def param_from_text(text: str) -> ParamValue:
    """What a flag's text means: an int, a float, true/false, or the text itself."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if _NUMBER.match(text):
        number = float(text)
        if math.isfinite(number):
            integral = "." not in text and "e" not in lowered
            return int(text) if integral and abs(number) < 2**53 else number
    return text[:MAX_VALUE_CHARS]


def params_clean(raw: Mapping[str, object]) -> tuple[dict[str, ParamValue], list[str]]:
    """The storable part of `raw` and what was refused (one message per kind of problem)."""
    clean: dict[str, ParamValue] = {}
    problems: list[str] = []
    for key, value in raw.items():
        if not isinstance(key, str) or len(key) > MAX_KEY_CHARS or not _KEY.match(key):
            problems.append(
                f"Parameter name {str(key)[:MAX_KEY_CHARS]!r}: use a letter or '_' first, then "
                f"letters, digits and '_.-/' (at most {MAX_KEY_CHARS} characters)."
            )
            continue
        stored = param_value(value)
        if stored is None:
            problems.append(f"Parameter {key!r}: give a number, true/false or text.")
            continue
        if len(clean) >= MAX_PARAMS:
            problems.append(f"Give at most {MAX_PARAMS} parameters.")
            break
        clean[key] = stored
    return clean, problems


def params_from_command(command: str) -> dict[str, ParamValue]:
    """The `--key value`, `--key=value` and bare `--flag` (true) arguments of a command.

    A flag followed by another flag, a shell operator or nothing is a switch (true);
    a negative number after a flag is its value. Text that shlex cannot split (an
    unclosed quote) is split on whitespace instead. Capped by `params_clean`.
    """
    text = command.replace("\\\n", " ")
    try:
        words = shlex.split(text, comments=True)
    except ValueError:
        words = text.split()
    found: dict[str, object] = {}
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word in _SHELL_STOPS or word.startswith((">", "2>")):
            continue
        if not word.startswith("--") or word == "--":
            continue
        key, equals, value = word[2:].partition("=")
        if equals:
            found[key] = param_from_text(value)
            continue
        following = words[index] if index < len(words) else None
        if following is None or following in _SHELL_STOPS or _is_flag(following):
            found[key] = True
            continue
        found[key] = param_from_text(following)
        index += 1
    clean, _ = params_clean({k: v for k, v in found.items() if _KEY.match(k)})
    return clean


def _is_flag(word: str) -> bool:
    return word.startswith("-") and not _NUMBER.match(word)


def params_merge(
    params: Mapping[str, ParamValue],
    sources: Mapping[str, str],
    new: Mapping[str, ParamValue],
    source: str,
) -> tuple[dict[str, ParamValue], dict[str, str]]:
    """The table with `new` laid over it; a key past MAX_PARAMS is not added."""
    merged, merged_sources = dict(params), dict(sources)
    for key, value in new.items():
        if key not in merged and len(merged) >= MAX_PARAMS:
            continue
        merged[key] = value
        merged_sources[key] = source
    return merged, merged_sources


def params_given(params: Mapping[str, Any], sources: Mapping[str, str]) -> dict[str, ParamValue]:
    """The keys given at submit: what a clone carries over (flags come from its command)."""
    return {k: v for k, v in params.items() if sources.get(k) == SOURCE_GIVEN}


def params_for_spec(
    *, command: str, given: Mapping[str, ParamValue]
) -> tuple[dict[str, ParamValue], dict[str, str]]:
    """A new job's table: its command's flags, then what was given."""
    from_command = params_from_command(command)
    table, sources = params_merge({}, {}, from_command, SOURCE_COMMAND)
    return params_merge(table, sources, given, SOURCE_GIVEN)


def params_from_lines(text: str) -> tuple[dict[str, ParamValue], list[str]]:
    """The form's `key=value` lines (blank lines and `#` comments skipped)."""
    raw: dict[str, object] = {}
    problems = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, equals, value = stripped.partition("=")
        if not equals:
            problems.append(f"Line {number}: write key=value, e.g. lr=0.001.")
            continue
        raw[key.strip()] = param_from_text(value.strip())
    clean, refused = params_clean(raw)
    return clean, problems + refused
