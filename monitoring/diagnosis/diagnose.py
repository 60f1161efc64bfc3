"""Why an attempt ended: its Slurm state, exit code and log tail against one table of rules.

The rules are `monitoring.diagnosis.rules.RULES` (the whole knowledge, first match
wins); this module applies them to the quotable lines of the tail
(`monitoring.diagnosis.log_scan`) and says which rank and node to blame
(`monitoring.diagnosis.blame`).
"""

import signal
from dataclasses import asdict, dataclass
from typing import Any

from jobs.enums import FailureClass, State
from jobs.rundir import WARNING_MARKER
from monitoring.diagnosis.blame import (
    FailedRank,
    first_failed,
    host_in_line,
    node_failure_node,
    rank_in_line,
    srun_failed_node,
)
from monitoring.diagnosis.clues import Clue, Rule
from monitoring.diagnosis.log_scan import Found, LogTail
from monitoring.diagnosis.rules import RULES, UNKNOWN, WARNED

TAIL_BYTES = 64 * 1024  # how much of the end of the log the rules read
# Signals a worker dies of from outside (the OOM killer, a crash), not NCCL's own abort.
_KILLED = frozenset({-signal.SIGKILL, -signal.SIGSEGV, -signal.SIGBUS, -signal.SIGILL})
_NO_RANK = frozenset({FailureClass.PREEMPTION, FailureClass.TIME_LIMIT})


@dataclass(frozen=True)
class Diagnosis:
    failure_class: str
    title: str
    explanation: str
    fixes: tuple[str, ...]
    evidence: str = ""  # the log line that gave it away
    rank: int | None = None
    node: str = ""  # the node to blame, when the log or Slurm names one
    exit_code: int | None = None
    local_rank: int | None = None
    failed_at: str = ""  # when the first rank failed, as torchrun printed it
    last_lines: tuple[str, ...] = ()  # the end of the log, for a failure no rule knows

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fixes"] = list(self.fixes)
        data["last_lines"] = list(self.last_lines)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Diagnosis":
        names = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in names}
        values["fixes"] = tuple(values.get("fixes", ()))
        values["last_lines"] = tuple(values.get("last_lines", ()))
        return cls(**values)


@dataclass(frozen=True)
class _Blame:
    rank: int | None = None
    local_rank: int | None = None
    node: str = ""
    failed_at: str = ""
    first: FailedRank | None = None


def _signal_note(exit_code: int | None) -> str:
    if exit_code is None:
        return ""
    if exit_code > 128:
        try:
            name = signal.Signals(exit_code - 128).name
        except ValueError:
            return f" Exit status {exit_code}."
        return f" Exit status {exit_code}: killed by {name}."
    return f" Exit status {exit_code}."


def _earliest(clues: tuple[Clue, ...], tail: LogTail) -> Found | None:
    best: Found | None = None
    for clue in clues:
        found = tail.first(clue.pattern, clue.context, clue.before)
        if found and (best is None or (found.index, found.column) < (best.index, best.column)):
            best = found
    return best


def _evidence(rule: Rule, tail: LogTail) -> str:
    """The first line the rule's clues match (the root, not the echoes); weaker clues after."""
    found = _earliest(rule.patterns, tail) or _earliest(rule.weaker, tail)
    return found.quote() if found else ""


def _ending(first: FailedRank) -> str:
    """How torchrun saw its first failed worker end: ` (killed by SIGKILL)`, ` (exit code 1)`."""
    if first.exit_code is None:
        return ""
    if first.exit_code < 0:
        try:
            return f" (killed by {signal.Signals(-first.exit_code).name})"
        except ValueError:
            return f" (killed by signal {-first.exit_code})"
    return f" (exit code {first.exit_code})"


def _killed_elsewhere(first: FailedRank | None, evidence: str) -> bool:
    """Whether the first failed worker was killed, and the evidence is another rank's."""
    if first is None or first.exit_code not in _KILLED:
        return False
    return first.rank is None or rank_in_line(evidence) != first.rank


def _blame(tail: LogTail, first: FailedRank | None, evidence: str, nodes: list[str]) -> _Blame:
    """Which rank and which node failed first, as torchrun, srun and the evidence say."""
    rank = first.rank if first else None
    local_rank = first.local_rank if first else None
    # srun knows the Slurm node name; torchrun only the host name.
    node = srun_failed_node(tail.text) or (first.host if first else "")
    if rank is None and evidence:
        rank = rank_in_line(evidence)
    if rank is None and local_rank is not None and len(nodes) <= 1:
        rank = local_rank  # on one node a local rank is the rank
    return _Blame(rank, local_rank, node, first.time if first else "", first)


def _where(
    rule: Rule, tail: LogTail, first: FailedRank | None, evidence: str, nodes: list[str]
) -> _Blame:
    blame = _blame(tail, first, evidence, nodes)
    only_node = nodes[0] if len(nodes) == 1 else ""
    if rule.failure_class == FailureClass.NODE_FAILURE:
        named = node_failure_node(tail.text) or host_in_line(evidence)
        return _Blame(node=named or only_node)
    if rule.failure_class == FailureClass.GPU_HARDWARE:
        node = host_in_line(evidence) or blame.node or only_node
        return _Blame(blame.rank, blame.local_rank, node, blame.failed_at, blame.first)
    if rule.failure_class in _NO_RANK:
        return _Blame()
    return blame


def _crash_explanation(rule: Rule, blame: _Blame) -> str:
    if blame.rank is None and not blame.node and blame.local_rank is None:
        return rule.explanation
    parts = [f"rank {blame.rank}"] if blame.rank is not None else []
    if blame.rank is None and blame.local_rank is not None:
        parts.append(f"local rank {blame.local_rank}")
    parts += [f"node {blame.node}"] if blame.node else []
    ending = _ending(blame.first) if blame.first else ""
    when = f" It failed at {blame.failed_at}." if blame.failed_at else ""
    return f"{rule.explanation} First to fail: {' on '.join(parts)}{ending}.{when}"


def diagnose(
    *, state: str, exit_code: int | None, log_tail: str, node_list: list[str] | None = None
) -> Diagnosis | None:
    """The failure class, explanation and fixes of an ended attempt; None if it succeeded."""
    tail = LogTail(log_tail[-TAIL_BYTES:])
    if state == State.COMPLETED and not exit_code:
        return _stopped_at_warning(tail.text)
    nodes = node_list or []
    first = first_failed(tail)
    for rule in RULES:
        if rule.when is not None and not rule.when(state, exit_code):
            continue
        by_state = state in rule.states
        evidence = _evidence(rule, tail)
        if not (by_state or evidence):
            continue
        if rule.echo_of_kill and not by_state and _killed_elsewhere(first, evidence):
            continue
        blame = _where(rule, tail, first, evidence, nodes)
        explanation = rule.explanation
        if rule.failure_class == FailureClass.RANK_CRASH:
            explanation = _crash_explanation(rule, blame)
            if blame.first and blame.first.line:
                evidence = blame.first.line  # the exit-code line of the first failure
        return Diagnosis(
            failure_class=str(rule.failure_class),
            title=rule.title,
            explanation=explanation + _signal_note(exit_code) * (state == State.FAILED),
            fixes=rule.fixes,
            evidence=evidence,
            rank=blame.rank,
            node=blame.node,
            exit_code=exit_code,
            local_rank=blame.local_rank,
            failed_at=blame.failed_at,
        )
    blame = _blame(tail, first, "", nodes)
    return Diagnosis(
        failure_class=str(UNKNOWN.failure_class),
        title=UNKNOWN.title,
        explanation=UNKNOWN.explanation + _signal_note(exit_code),
        fixes=UNKNOWN.fixes,
        evidence=tail.last_error(),
        rank=blame.rank,
        node=blame.node,
        exit_code=exit_code,
        local_rank=blame.local_rank,
        failed_at=blame.failed_at,
        last_lines=tail.last_lines(),
    )


def _stopped_at_warning(tail: str) -> Diagnosis | None:
    """A clean exit after the batch script passed Slurm's time-limit warning on."""
    at = tail.rfind(WARNING_MARKER)
    if at < 0:
        return None
    end = tail.find("\n", at)
    return Diagnosis(
        failure_class=str(WARNED.failure_class),
        title=WARNED.title,
        explanation=WARNED.explanation,
        fixes=WARNED.fixes,
        evidence=tail[at : end if end >= 0 else len(tail)].strip(),
        exit_code=0,
    )
