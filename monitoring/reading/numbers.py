"""Read one number whole from training output: sign, thousands separators, exponent, unit.

Pure and linear: a hand-written scanner, no regular expressions. A token that is
not a number in full (`1.2.3`, `12:30:01`, `2.5.1+cu124`, `0x5581`) is unreadable as
a whole and is never cut down to a prefix that looks like one.
"""

from __future__ import annotations

import re
from typing import NamedTuple

# Units a value may carry glued to it (`123.45ms`, `66.91GiB`, `6.73G`, `12.34%`).
UNITS = frozenset(
    {
        "%",
        "s",
        "ms",
        "us",
        "µs",
        "ns",
        "sec",
        "secs",
        "min",
        "h",
        "hr",
        "b",
        "kb",
        "mb",
        "gb",
        "tb",
        "kib",
        "mib",
        "gib",
        "tib",
        "k",
        "m",
        "g",
        "t",
        "x",
        "tflops",
        "gflops",
        "pflops",
        "tflop",
        "w",
    }
)
# What a rate is per: the right side of `/` in `it/s`, `ms/step`, `samples/sec`, `tokens/sec/gpu`.
PER_UNITS = frozenset(
    {
        "s",
        "sec",
        "secs",
        "second",
        "seconds",
        "ms",
        "us",
        "min",
        "h",
        "hr",
        "hour",
        "step",
        "steps",
        "it",
        "iter",
        "gpu",
        "device",
        "batch",
        "sample",
        "token",
        "tok",
        "img",
        "image",
        "epoch",
    }
)
# Separators that may end a number token.
_ENDS = frozenset(" \t,|;)]}'\"<>=\r\n")
NON_FINITE = frozenset({"nan", "inf", "infinity", "-inf", "+inf", "-nan", "-infinity"})


def non_finite(word: str) -> float:
    """The value of a NON_FINITE spelling: a diverged loss is a value, nan or ±inf, not a gap."""
    return float(word.lower().replace("infinity", "inf"))


class Number(NamedTuple):
    """A scanned token. Value None: a token that is no number (nan and inf are floats)."""

    end: int
    value: float | int | None
    unit: str = ""
    readable: bool = True


def is_rate(unit: str) -> bool:
    """`it/s`, `ms/step`, `/s`: a unit with a per-thing after its last `/`."""
    if "/" not in unit:
        return False
    return unit.rsplit("/", 1)[1].lower() in PER_UNITS


def _digits(text: str, i: int) -> int:
    while i < len(text) and "0" <= text[i] <= "9":
        i += 1
    return i


def _skip_token(text: str, i: int) -> int:
    """End of the unreadable token starting before i: up to the next separator."""
    while i < len(text) and text[i] not in _ENDS and text[i] != "(":
        i += 1
    return i


def _unit(text: str, i: int) -> tuple[str, int]:
    """A glued unit at i (`ms`, `GiB`, `%`, `it/s`, `/s`, `s/batch`), or ('', i) when none fits."""
    j = i
    while j < len(text) and (text[j].isalpha() or text[j] in "%/µ"):
        if text[j] == "/" and not (j + 1 < len(text) and text[j + 1].isalpha()):
            break
        j += 1
    unit = text[i:j]
    if not unit:
        return "", i
    if unit.lower() in UNITS or is_rate(unit):
        return unit, j
    if "/" in unit:  # `0/micro_step=34`: the slash joins two fields, it is no unit
        head = unit.split("/", 1)[0]
        if not head or head.lower() in UNITS:
            return head, i + len(head)
    return unit, -1


# The common case, `0.25` or `1500` followed by a separator: read without the scanner's checks.
_PLAIN = re.compile(r"[-+]?([0-9]{1,30})(\.[0-9]{1,30})?")
_NOT_PLAIN_AFTER = frozenset(".:_+-%/µ,")


def scan_number(text: str, i: int) -> Number | None:
    """The number token starting at i, or None when text[i:] does not start one."""
    plain = _PLAIN.match(text, i)
    if plain is not None:
        end = plain.end()
        after = text[end : end + 1]
        if not after or (not after.isalnum() and after not in _NOT_PLAIN_AFTER):
            raw = plain.group()
            return Number(end, float(raw) if plain.group(2) else int(raw))
    return _scan(text, i)


def _scan(text: str, i: int) -> Number | None:
    start = i
    n = len(text)
    if i < n and text[i] in "+-":
        i += 1
    word_end = i
    while word_end < n and text[word_end].isalpha() and word_end - i < 9:
        word_end += 1
    if text[start:word_end].lower() in NON_FINITE and (word_end == n or text[word_end] in _ENDS):
        return Number(word_end, non_finite(text[start:word_end]))
    digits_end = _digits(text, i)
    if digits_end == i and not (i + 1 < n and text[i] == "." and "0" <= text[i + 1] <= "9"):
        return None
    raw = text[i:digits_end]
    i = digits_end
    # Thousands separators: `5,856`, `1,204.51` (a first group of 1-3 digits, then ,ddd groups).
    if 0 < len(raw) <= 3:
        while i + 3 < n + 1 and text[i : i + 1] == "," and _digits(text, i + 1) == i + 4:
            raw += text[i + 1 : i + 4]
            i += 4
    is_float = False
    if i < n and text[i] == ".":
        frac_end = _digits(text, i + 1)
        raw += text[i:frac_end]
        i = frac_end
        is_float = True
    if i + 1 < n and text[i] in "eE":
        j = i + 1
        if text[j] in "+-":
            j += 1
        exp_end = _digits(text, j)
        if exp_end > j:
            raw += text[i:exp_end]
            i = exp_end
            is_float = True
    if i < n and (
        ("0" <= text[i] <= "9") or (text[i] in ".:_+-" and i + 1 < n and text[i + 1].isalnum())
    ):
        return Number(_skip_token(text, i), None, readable=False)
    unit = ""
    if i < n and (text[i].isalpha() or text[i] in "%/µ"):
        unit, unit_end = _unit(text, i)
        if unit_end < 0 or (unit_end < n and (text[unit_end].isalnum() or text[unit_end] == "_")):
            return Number(_skip_token(text, i), None, readable=False)
        i = unit_end
    sign = "-" if text[start] == "-" else ""
    number = sign + (raw if raw[:1] != "." else "0" + raw)
    try:
        value: float | int = float(number) if is_float else int(number)
    except ValueError:
        return Number(_skip_token(text, i), None, readable=False)
    return Number(i, value, unit)
