"""Where a tqdm bar's text begins and ends on a line. Pure and linear."""

from __future__ import annotations


def bar_start(text: str) -> int:
    """Where a `desc: 45%|` bar's percentage begins, or -1."""
    at = text.find("%|")
    if at < 0:
        return -1
    i = at
    while i > 0 and (text[i - 1].isdigit() or text[i - 1] == "."):
        i -= 1
    return i


def bar_end(text: str) -> int:
    """Where a tqdm bar's text ends: after the `]` closing its `[elapsed<remaining, rate,
    postfix]` (nested brackets counted); the whole text when it holds no such bar."""
    start = bar_start(text)
    edge = text.find("|", text.find("%|", start) + 2) if start >= 0 else -1
    at = text.find("[", edge) if edge >= 0 else -1
    if at < 0:
        return len(text)
    depth = 0
    for index in range(at, len(text)):
        depth += (text[index] == "[") - (text[index] == "]")
        if depth == 0:
            return index + 1
    return len(text)
