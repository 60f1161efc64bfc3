"""What a rule of the diagnosis is made of: its clues, its class, when it applies.

The table is `monitoring.diagnosis.rules.RULES`; the distributed runtime's rules are
`monitoring.diagnosis.network`'s.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from jobs.enums import State


@dataclass(frozen=True)
class Clue:
    """A line that reveals a failure: `pattern` on it and, if given, `context` on it or on one
    of the `before` lines above it (a traceback's frames, NCCL's `Last error:` header)."""

    pattern: re.Pattern[str]
    context: re.Pattern[str] | None = None
    before: int = 0


@dataclass(frozen=True)
class Rule:
    failure_class: str
    title: str
    explanation: str
    fixes: tuple[str, ...]
    states: frozenset[str] = frozenset()  # Slurm states that mean this, whatever the log says
    patterns: tuple[Clue, ...] = ()  # any of them in the log tail; the earliest is the evidence
    # Clues that reveal the class too but are evidence only when no pattern matched (the
    # launcher's report of a crash, a step's cancel line under the job's).
    weaker: tuple[Clue, ...] = ()
    # Only when the attempt failed this way (None: any state, e.g. the log alone decides).
    when: Callable[[str, int | None], bool] | None = None
    # Not this class when another rank was killed first: the peers' lost connections and
    # timeouts are the echo of that kill (gloo: "typically caused by a remote worker crashing").
    echo_of_kill: bool = False


def failed(state: str, exit_code: int | None) -> bool:
    """A rule's `when`: the attempt failed (Slurm's state or a non-zero exit)."""
    return state in (State.FAILED, State.OUT_OF_MEMORY) or bool(exit_code)


def not_cancelled(state: str, exit_code: int | None) -> bool:
    """A rule's `when`: anything but a plain cancel (a cancel may print anything)."""
    return state != State.CANCELLED or bool(exit_code)


def clues(*patterns: str) -> tuple[Clue, ...]:
    """Clues of plain patterns, `^` anchored at each line."""
    return tuple(Clue(re.compile(p, re.M)) for p in patterns)
