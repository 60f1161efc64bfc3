"""What the portal itself saw on an ended attempt's nodes, beside what its diagnosis says:
uncorrected ECC errors that rose in the GPU samples, and a node that stayed behind the
others (or hot) for most of the run."""

from clusters.slurm.hostlist import expand_nodes
from jobs.models import Attempt
from jobs.rundir import GPU_FILE_PREFIX, GPU_FILE_SUFFIX, gpu_file_node
from monitoring.hangs.stragglers import persistent_stragglers
from monitoring.models import LogFile, NodeSignal
from monitoring.nodes.signals import Blame
from monitoring.reading.gpu import EccRise, ecc_rises

_DETAIL_CHARS = 500


def _ecc_detail(rises: list[EccRise]) -> str:
    gpus = ", ".join(f"GPU {r.index} from {r.first} to {r.high}" for r in rises)
    pending = any(r.pending for r in rises)
    text = f"Uncorrected ECC errors rose during the attempt (nvidia-smi): {gpus}" + (
        "; pages wait to be retired" if pending else ""
    )
    return text[:_DETAIL_CHARS]


def ecc_blames(attempt: Attempt) -> list[Blame]:
    """A blame for each node of the attempt whose uncorrected ECC count rose while it ran
    (a rise: the count is since the driver loaded, so an older count blames no one)."""
    nodes = set(expand_nodes(attempt.node_list))
    if not nodes:
        return []
    files = LogFile.objects.filter(
        attempt=attempt, name__startswith=GPU_FILE_PREFIX, name__endswith=GPU_FILE_SUFFIX
    ).only("name", "reader_state")
    blames = []
    for log_file in sorted(files, key=lambda f: f.name):
        node = gpu_file_node(log_file.name)
        rises = ecc_rises(log_file.reader_state)
        if node in nodes and rises:
            blames.append(Blame(node=node, kind=NodeSignal.GPU_ECC, detail=_ecc_detail(rises)))
    return blames


def straggler_blames(attempt: Attempt) -> list[Blame]:
    """A blame for each node the attempt's whole run names as a straggler (a hint: its
    weight is low, monitoring.hangs.stragglers for what counts)."""
    nodes = set(expand_nodes(attempt.node_list))
    found: dict[str, list[str]] = {}
    for straggler in persistent_stragglers(attempt=attempt):
        if straggler.node in nodes:
            found.setdefault(straggler.node, []).append(straggler.message)
    return [
        Blame(node=node, kind=NodeSignal.STRAGGLER, detail=" ".join(messages)[:_DETAIL_CHARS])
        for node, messages in sorted(found.items())
    ]


def observed_blames(attempt: Attempt) -> list[Blame]:
    return [*ecc_blames(attempt), *straggler_blames(attempt)]
