"""What an ended attempt says about its nodes: which one it blames, and which ran it well.

Only a diagnosis that names a node of the attempt blames it (a one-node attempt's GPU
fault or node failure names its only node); a user's own error blames no node, and a
node is credited with a healthy job only when the attempt ran to its end.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from clusters.slurm.hostlist import expand_nodes
from jobs.enums import FailureClass, State
from jobs.models import Attempt
from monitoring.diagnosis.diagnose import Diagnosis
from monitoring.diagnosis.failures import node_of_attempt
from monitoring.diagnosis.preflight import preflight_nodes
from monitoring.models import NodeSignal

# The failure classes that can be a node's fault, and the signal each records.
_NODE_CLASSES = {
    FailureClass.GPU_HARDWARE: NodeSignal.GPU_HARDWARE,
    FailureClass.NODE_FAILURE: NodeSignal.NODE_FAILURE,
    FailureClass.HANG: NodeSignal.HANG,
    FailureClass.NCCL_TIMEOUT: NodeSignal.NCCL_TIMEOUT,
}
# A node's own faults: on a one-node attempt the node is to blame even when unnamed.
_ONLY_NODE_BLAMED = frozenset({FailureClass.GPU_HARDWARE, FailureClass.NODE_FAILURE})
_RAN_TO_THE_END = frozenset({State.COMPLETED})
_DETAIL_CHARS = 500


@dataclass(frozen=True)
class Blame:
    node: str
    kind: str
    detail: str


@dataclass(frozen=True)
class AttemptWord:
    """An ended attempt's word on its nodes."""

    blames: tuple[Blame, ...] = ()
    healthy: tuple[str, ...] = ()

    def adding(self, blames: Sequence[Blame]) -> "AttemptWord":
        """With more blames (monitoring.nodes.observed): a node blamed ran no healthy job."""
        if not blames:
            return self
        blamed = {b.node for b in blames}
        return AttemptWord(
            blames=(*self.blames, *blames),
            healthy=tuple(n for n in self.healthy if n not in blamed),
        )


def _blamed_node(attempt: Attempt, diagnosis: Diagnosis, nodes: list[str]) -> str:
    node = node_of_attempt(diagnosis.node, nodes) if diagnosis.node else ""
    if not node and len(nodes) == 1 and attempt.failure_class in _ONLY_NODE_BLAMED:
        node = nodes[0]
    return node


def attempt_word(attempt: Attempt) -> AttemptWord:
    """The blame and the healthy nodes of an ended, diagnosed attempt (pure on its row)."""
    nodes = expand_nodes(attempt.node_list)
    if not nodes or not attempt.is_finished:
        return AttemptWord()
    if attempt.state in _RAN_TO_THE_END:
        return AttemptWord(healthy=tuple(nodes))
    if attempt.failure_class == FailureClass.PREFLIGHT:  # each faulty node of the allocation
        found = preflight_nodes(attempt.diagnosis).items()
        return AttemptWord(
            blames=tuple(
                Blame(node=n, kind=NodeSignal.PREFLIGHT, detail=f"Preflight: {why}"[:_DETAIL_CHARS])
                for n, why in found
                if n in nodes
            )
        )
    kind = _NODE_CLASSES.get(attempt.failure_class)  # type: ignore[call-overload]
    if kind is None or not attempt.diagnosis:
        return AttemptWord()
    diagnosis = Diagnosis.from_json(attempt.diagnosis)
    node = _blamed_node(attempt, diagnosis, nodes)
    if not node:
        return AttemptWord()
    detail = diagnosis.title + (f": {diagnosis.evidence.strip()}" if diagnosis.evidence else "")
    return AttemptWord(blames=(Blame(node=node, kind=kind, detail=detail[:_DETAIL_CHARS]),))
