"""GPU sampler files of an attempt: found for its own nodes only, read for its own GPUs only.

A job can write any file into its run directory; a `gpu-*.csv` counts only when
it names one of the attempt's Slurm nodes (at most one per allocated node), and
a sample counts only for a GPU index the job was allocated. What is refused is
counted on the attempt's `AttemptIngest`, and only once the attempt's nodes are known:
the files poll runs apart from the state poll and often lists a new job's run directory
first, when every file would look like another node's.
"""

import fnmatch
from collections.abc import Iterable

from clusters.agent import AgentReply
from clusters.slurm.hostlist import expand_nodes
from jobs.models import Attempt
from jobs.rundir import GPU_FILE_GLOB, GpuSeries, gpu_file_node, run_dir_key
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.gpu import GpuParseError, faults_tally, parse_gpu_line

GPU_FIELDS = (
    ("utilization", "utilization"),
    ("memory_used", "memory_used_mib"),
    ("temperature", "temperature_c"),
    ("power", "power_w"),
)

Point = tuple[int, str, float, float]
MAX_NODE_GPUS = 64  # no node has more; a larger index is not a GPU


def _own_gpu_files(attempt: Attempt, names: list[str]) -> list[str]:
    nodes = set(expand_nodes(attempt.node_list))
    own = sorted(name for name in names if gpu_file_node(name) in nodes)
    return own[: attempt.job.nodes]


def discover_gpu_files(
    attempts: Iterable[Attempt],
    reply: AgentReply,
    files: dict[tuple[int, str], LogFile],
    notes: dict[int, AttemptIngest],
) -> set[int]:
    """Follow the attempts' new own GPU files; returns the attempts whose notes changed."""
    found, changed = [], set()
    for attempt in attempts:
        listing = reply.listings.get(run_dir_key(attempt.uuid))
        # Nodes not yet known (the files poll saw the sampler's file before the state poll
        # recorded where the job runs): no file can be judged yet, so none is refused.
        if listing is None or listing.error or not attempt.node_list:
            continue
        names = [e.name for e in listing.entries if fnmatch.fnmatch(e.name, GPU_FILE_GLOB)]
        followed = {n for (a, n) in files if a == attempt.pk and gpu_file_node(n) is not None}
        own = _own_gpu_files(attempt, names)
        room = max(attempt.job.nodes - len(followed), 0)
        new = [name for name in own if name not in followed][:room]
        found += [LogFile(attempt_id=attempt.pk, name=name) for name in new]
        refused = len(set(names) - set(own) - followed)
        note = notes[attempt.pk]
        if refused > note.dropped_gpu_files:  # the most seen in one listing
            note.dropped_gpu_files = refused
            changed.add(attempt.pk)
    if found:
        LogFile.objects.bulk_create(found, ignore_conflicts=True)
        for log_file in LogFile.objects.filter(
            attempt_id__in={f.attempt_id for f in found}, name__in={f.name for f in found}
        ):
            files[(log_file.attempt_id, log_file.name)] = log_file
    return changed


def gpu_points(
    attempt: Attempt, log_file: LogFile, lines: list[str], note: AttemptIngest
) -> list[Point]:
    """Points of the sampler's lines, for as many GPUs as the job was allocated on the node.

    Slurm picks the physical indexes (GPU 1 when another job holds GPU 0), so a file
    counts the first `gpus_per_node` indexes it shows; they are kept on the file's row
    (`metric_names`) so that later polls keep the same ones. Their fault fields are tallied
    on the row's parser state (`reader_state`, stdout's reader's on the stdout row).
    """
    node = gpu_file_node(log_file.name) or ""
    allowed = {int(index) for index in log_file.metric_names if index.isdigit()}
    points: list[Point] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            sample = parse_gpu_line(line)
        except GpuParseError:
            continue
        if sample.index not in allowed:
            if len(allowed) >= attempt.job.gpus_per_node or not 0 <= sample.index < MAX_NODE_GPUS:
                note.dropped_gpu_samples += 1
                continue
            allowed.add(sample.index)
            log_file.metric_names = [*log_file.metric_names, str(sample.index)]
        # The fault counts are no series: a tally on the file's row (read by monitoring.nodes).
        if isinstance(log_file.reader_state, dict):
            faults_tally(log_file.reader_state, sample)
        x = sample.time.timestamp()
        for metric, attribute in GPU_FIELDS:
            value = getattr(sample, attribute)
            if value is not None:
                points.append((attempt.pk, GpuSeries(node, sample.index, metric).name, x, value))
    return points
