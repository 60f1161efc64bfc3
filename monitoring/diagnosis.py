"""Why an attempt ended: its Slurm state, exit code and log tail against one table of rules.

The rules are `monitoring.diagnosis_rules.RULES` (the whole knowledge, first match
wins); this module applies them and says which rank and node to blame.
"""

import re
import signal
from dataclasses import asdict, dataclass
from typing import Any

from jobs.models import FailureClass, State
from jobs.rundir import WARNING_MARKER
from monitoring.diagnosis_rules import RULES, UNKNOWN, WARNED, Rule

TAIL_BYTES = 64 * 1024  # how much of the end of the log the rules read

# srun names the node of each task that failed ("srun: error: n2: task 1: Exited with
# exit code 1"); the first such line is the task that took the job down.
_SRUN_TASK = re.compile(
    r"^srun: error: (?P<node>[\w.-]+): tasks? (?P<task>[\d,-]+): "
    r"(?P<how>Exited with exit code (?P<code>\d+)|Killed|Segmentation fault|Aborted"
    r"|[A-Z][\w ]+)",
    re.M,
)
# torchrun's ChildFailedError report: the root cause's rank, host and exit code.
_ROOT_CAUSE = re.compile(
    r"Root Cause \(first observed failure\):\s*\n\[\d+\]:\s*\n"
    r"(?:\s+\w+\s*:.*\n)*?\s+host\s*:\s*(?P<host>\S+)\s*\n"
    r"\s+rank\s*:\s*(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?\s*\n"
    r"\s+exitcode\s*:\s*(?P<code>-?\d+)",
)
_NODE_FAILURE_NODE = re.compile(r"Node failure on (?P<node>[\w.-]+)")
_RANK_IN_LINE = re.compile(r"\[(?:PG \S+ )?Rank (?P<rank>\d+)\]|\[rank(?P<rank2>\d+)\]")


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

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["fixes"] = list(self.fixes)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Diagnosis":
        names = cls.__dataclass_fields__
        values = {k: v for k, v in data.items() if k in names}
        values["fixes"] = tuple(values.get("fixes", ()))
        return cls(**values)


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


def _evidence(rule: Rule, tail: str) -> str:
    """The first line of the log that a pattern of the rule matches (the root, not the echoes)."""
    best: tuple[int, str] | None = None
    for pattern in rule.patterns:
        match = pattern.search(tail)
        if match and (best is None or match.start() < best[0]):
            # The whole line the match is on, as the log shows it.
            start = tail.rfind("\n", 0, match.start()) + 1
            end = tail.find("\n", match.start())
            line = tail[start : end if end >= 0 else len(tail)]
            best = (match.start(), line.strip()[:500])
    return best[1] if best else ""


def _rank_ending(tail: str) -> str:
    """How torchrun saw its first failed worker end: ` (killed by SIGKILL)`, ` (exit code 1)`."""
    root = _ROOT_CAUSE.search(tail)
    if not root:
        return ""
    code = int(root["code"])
    if code < 0:
        try:
            return f" (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f" (killed by signal {-code})"
    return f" (exit code {code})"


def _blame(tail: str, evidence: str) -> tuple[int | None, str]:
    """Which rank and which node failed first, as torchrun and srun report it."""
    rank: int | None = None
    node = ""
    root = _ROOT_CAUSE.search(tail)
    if root:
        rank = int(root["rank"])
        node = root["host"]
    for match in _SRUN_TASK.finditer(tail):
        if match["how"].startswith("Exited with exit code") and match["code"] == "0":
            continue
        # srun knows the Slurm node name; torchrun only the host name.
        node = match["node"]
        break
    if rank is None and evidence:
        found = _RANK_IN_LINE.search(evidence)
        if found:
            rank = int(found["rank"] or found["rank2"])
    return rank, node


def diagnose(
    *, state: str, exit_code: int | None, log_tail: str, node_list: list[str] | None = None
) -> Diagnosis | None:
    """The failure class, explanation and fixes of an ended attempt; None if it succeeded."""
    tail = log_tail[-TAIL_BYTES:]
    if state == State.COMPLETED and not exit_code:
        return _stopped_at_warning(tail)
    nodes = node_list or []
    for rule in RULES:
        if rule.when is not None and not rule.when(state, exit_code):
            continue
        by_state = state in rule.states
        evidence = _evidence(rule, tail) if rule.patterns else ""
        if not (by_state or evidence):
            continue
        rank, node = _blame(tail, evidence)
        if rule.failure_class == FailureClass.NODE_FAILURE:
            named = _NODE_FAILURE_NODE.search(tail)
            node = named["node"] if named else (nodes[0] if len(nodes) == 1 else "")
            rank = None
        elif rule.failure_class in (FailureClass.PREEMPTION, FailureClass.TIME_LIMIT):
            rank, node = None, ""
        explanation = rule.explanation
        if rule.failure_class == FailureClass.RANK_CRASH and (rank is not None or node):
            parts = [f"rank {rank}"] if rank is not None else []
            parts += [f"node {node}"] if node else []
            where = " on ".join(parts)
            explanation = f"{explanation} First to fail: {where}{_rank_ending(tail)}."
        return Diagnosis(
            failure_class=str(rule.failure_class),
            title=rule.title,
            explanation=explanation + _signal_note(exit_code) * (state == State.FAILED),
            fixes=rule.fixes,
            evidence=evidence,
            rank=rank,
            node=node,
            exit_code=exit_code,
        )
    rank, node = _blame(tail, "")
    return Diagnosis(
        failure_class=str(UNKNOWN.failure_class),
        title=UNKNOWN.title,
        explanation=UNKNOWN.explanation + _signal_note(exit_code),
        fixes=UNKNOWN.fixes,
        evidence=_last_error_line(tail),
        rank=rank,
        node=node,
        exit_code=exit_code,
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


_ERROR_LINE = re.compile(
    r"^.*(?:Error|error|ERROR|Exception|FAILED|Traceback|Segmentation fault|core dumped"
    r"|Killed|Aborted).*$",
    re.M,
)


def _last_error_line(tail: str) -> str:
    found = _ERROR_LINE.findall(tail)
    return found[-1].strip()[:500] if found else ""
