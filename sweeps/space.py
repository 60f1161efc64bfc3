"""The search space of a sweep, its check, and the command a trial's settings make.

A space maps each setting to a range or to choices:
    {"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": true},
     "layers": {"type": "int", "low": 2, "high": 8},
     "opt": ["adam", "sgd"]}            (a list is short for {"type": "categorical", ...})
The command names a setting as {lr}; its value goes in shell-quoted.
"""

import itertools
import math
import re
import shlex
from collections.abc import Mapping
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

MAX_SETTINGS = 20
MAX_CHOICES = 100
MAX_GRID = 10_000
MAX_FIRST_TRIALS = 100
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# A first trial may give its own node count beside its settings.
NODES_KEY = "nodes"

Choice = str | int | float | bool


class SpaceError(ValueError):
    """The space, the first trials or the command do not fit together; the text says why."""


def _choice(name: str, value: object) -> Choice:
    if isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    raise SpaceError(f"Setting {name}: a choice must be a number, true/false or text.")


def _number(name: str, spec: Mapping[str, Any], key: str) -> float:
    value = spec.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SpaceError(f"Setting {name}: give {key} as a number.")
    return float(value)


def _distribution(name: str, spec: object) -> BaseDistribution:
    if isinstance(spec, list):
        spec = {"type": "categorical", "choices": spec}
    if not isinstance(spec, Mapping):
        raise SpaceError(f'Setting {name}: give a list of choices or {{"type": ..., ...}}.')
    kind = spec.get("type")
    if kind == "categorical":
        choices = spec.get("choices")
        if not isinstance(choices, list) or not 1 <= len(choices) <= MAX_CHOICES:
            raise SpaceError(f"Setting {name}: give between 1 and {MAX_CHOICES} choices.")
        return CategoricalDistribution([_choice(name, c) for c in choices])
    if kind not in ("float", "int"):
        raise SpaceError(f"Setting {name}: the type is float, int or categorical.")
    low, high = _number(name, spec, "low"), _number(name, spec, "high")
    log = bool(spec.get("log", False))
    if low > high:
        raise SpaceError(f"Setting {name}: low must not be above high.")
    if log and low <= 0:
        raise SpaceError(f"Setting {name}: a log scale needs low above 0.")
    if kind == "int":
        if low != int(low) or high != int(high):
            raise SpaceError(f"Setting {name}: an int range has whole bounds.")
        return IntDistribution(int(low), int(high), log=log)
    return FloatDistribution(low, high, log=log)


def distributions(space: object) -> dict[str, BaseDistribution]:
    """Each setting's Optuna distribution, or a SpaceError naming the setting to fix."""
    if not isinstance(space, Mapping) or not space:
        raise SpaceError('Give the search as a JSON object, e.g. {"lr": [0.1, 0.01]}.')
    if len(space) > MAX_SETTINGS:
        raise SpaceError(f"Search at most {MAX_SETTINGS} settings at once.")
    for name in space:
        if not _NAME.match(str(name)) or name == NODES_KEY:
            raise SpaceError(
                f"Setting {name!r}: use letters, digits and _ (not 'nodes', a trial's size)."
            )
    return {name: _distribution(name, spec) for name, spec in space.items()}


def grid(dists: Mapping[str, BaseDistribution]) -> dict[str, list[Choice]]:
    """The grid sampler's points per setting: every setting must be a list of choices."""
    points: dict[str, list[Choice]] = {}
    size = 1
    for name, dist in dists.items():
        if not isinstance(dist, CategoricalDistribution):
            raise SpaceError(f"Setting {name}: a grid search needs a list of choices.")
        points[name] = list(dist.choices)  # type: ignore[arg-type]
        size *= len(dist.choices)
    if size > MAX_GRID:
        raise SpaceError(f"The grid has {size} points; keep it under {MAX_GRID}.")
    return points


def grid_size(dists: Mapping[str, BaseDistribution]) -> int:
    return math.prod(len(points) for points in grid(dists).values())


def grid_points(dists: Mapping[str, BaseDistribution]) -> list[dict[str, Choice]]:
    """Every point of the grid, in the order the choices are given (the first varies slowest)."""
    points = grid(dists)
    names = list(points)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*points.values())]


def first_trials_checked(
    raw: object, dists: Mapping[str, BaseDistribution]
) -> list[dict[str, Choice]]:
    """The first trials, each a full setting of the space (plus an optional node count)."""
    if raw in (None, ""):
        return []
    if not isinstance(raw, list):
        raise SpaceError('Give the first trials as a JSON list, e.g. [{"lr": 0.01}].')
    if len(raw) > MAX_FIRST_TRIALS:
        raise SpaceError(f"Give at most {MAX_FIRST_TRIALS} first trials.")
    checked = []
    for index, trial in enumerate(raw, start=1):
        if not isinstance(trial, Mapping):
            raise SpaceError(f"First trial {index}: give an object of settings.")
        missing = sorted(set(dists) - set(trial))
        unknown = sorted(set(trial) - set(dists) - {NODES_KEY})
        if missing or unknown:
            raise SpaceError(
                f"First trial {index}: give every setting of the search and no other "
                f"(missing: {', '.join(missing) or 'none'}; "
                f"unknown: {', '.join(unknown) or 'none'})."
            )
        values = {name: _choice(name, value) for name, value in trial.items()}
        for name, dist in dists.items():
            if not _within(dist, values[name]):
                raise SpaceError(
                    f"First trial {index}: {name}={values[name]!r} is outside its range."
                )
        nodes = values.get(NODES_KEY)
        if NODES_KEY in values and (
            isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1
        ):
            raise SpaceError(f"First trial {index}: nodes is a whole number of at least 1.")
        checked.append(values)
    return checked


def _within(dist: BaseDistribution, value: Choice) -> bool:
    if isinstance(dist, CategoricalDistribution):
        return value in dist.choices
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(dist, IntDistribution):
        return value == int(value) and dist.low <= value <= dist.high
    if isinstance(dist, FloatDistribution):
        return dist.low <= value <= dist.high
    return False


def placeholders(command: str) -> set[str]:
    return set(_PLACEHOLDER.findall(command))


def command_problem(command: str, dists: Mapping[str, BaseDistribution]) -> str:
    """Why the command and the space do not match; empty when each names the other's settings."""
    named = placeholders(command)
    unknown = sorted(named - set(dists))
    if unknown:
        return f"The command names {', '.join('{' + n + '}' for n in unknown)}, not in the search."
    unused = sorted(set(dists) - named)
    if unused:
        return f"Put {', '.join('{' + n + '}' for n in unused)} into the command, or drop them."
    return ""


def command_for(command: str, params: Mapping[str, Choice]) -> str:
    """The command with each {name} replaced by its value, shell-quoted."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            return match.group(0)
        return shlex.quote(str(params[name]))

    return _PLACEHOLDER.sub(value, command)
