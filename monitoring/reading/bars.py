"""Where a tqdm bar's text begins and ends on a line. Pure and linear.

A bar is its percentage, then its drawing, then its count `i/N`: `desc: 45%|####5 | 45/100`
as tqdm draws it, or with no `|` at all when a custom `bar_format` or an ASCII drawing
leaves it out (`Training:  45% 45/100 [...]`, `45%  ━━━━━  45/100`).
"""

from __future__ import annotations

import re

# The percentage, at most 64 characters of drawing (no word, no bracket; an ASCII drawing's
# partial cell is a digit after `#`: `####5`), the count.
_BAR = re.compile(
    r"(?<![\w.])\d{1,3}(?:\.\d+)?%"
    r"(?:\|[^|\n]{0,64}\||(?:[^\w\[\]()/:,]|(?<=#)\d){0,64}?)\s*\d+/\d+"
)


def _bar(text: str) -> re.Match[str] | None:
    return _BAR.search(text) if "%" in text else None


def bar_start(text: str) -> int:
    """Where a `desc: 45%|` bar's percentage begins, or -1."""
    found = _bar(text)
    return found.start() if found else -1


def bar_end(text: str) -> int:
    """Where a tqdm bar's text ends: after the `]` closing its `[elapsed<remaining, rate,
    postfix]` (nested brackets counted); the whole text when it holds no such bar."""
    found = _bar(text)
    at = text.find("[", found.end()) if found else -1
    if at < 0:
        return len(text)
    depth = 0
    for index in range(at, len(text)):
        depth += (text[index] == "[") - (text[index] == "]")
        if depth == 0:
            return index + 1
    return len(text)
