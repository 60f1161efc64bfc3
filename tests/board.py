"""The Grafana board in the repository: its queries, the metric names they read, and the
queries with the board's variables filled in (for a real Prometheus)."""

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BOARD = Path(__file__).resolve().parent.parent / "deploy" / "grafana" / "portal.json"
# Words of PromQL that are not metric names (functions are followed by "(", so not here).
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "inf", "nan", "atan2"}
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(
    r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
_WORD = re.compile(r"(?<![\w:.$])([A-Za-z_:][A-Za-z0-9_:]*)(\s*\()?")
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")


def load_board() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(BOARD.read_text())
    return board


def all_panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for panel in board.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def board_exprs(board: dict[str, Any]) -> list[str]:
    """Every PromQL expression: the panels' targets and the query variables'."""
    exprs = [t["expr"] for p in all_panels(board) for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        if variable["type"] == "query":
            found = re.fullmatch(r"label_values\((.*),\s*\w+\)", variable["query"]["query"])
            assert found, variable["query"]
            exprs.append(found.group(1))
    return exprs


def metric_names(expr: str) -> set[str]:
    """The metric names an expression reads (strings, matchers, ranges and label lists aside)."""
    text = _STRING.sub('""', expr)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    return {word for word, call in _WORD.findall(text) if not call and word.lower() not in KEYWORDS}


def variables(expr: str) -> set[str]:
    return set(_VARIABLE.findall(expr))


def concrete(expr: str, **values: str) -> str:
    """The expression with Grafana's variables replaced: the given ones, and its intervals."""
    builtins = {"__rate_interval": "1m", "__interval": "15s", "__range": "1h"}
    return _VARIABLE.sub(lambda m: {**builtins, **values}[m.group(1)], expr)
