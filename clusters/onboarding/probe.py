"""The readiness test jobs: one short job per node writes into the base run directory.

Each job runs where the portal's jobs run (its partition, pinned to its node, one
GPU where the node has some), records the node's Python and one sample of the GPU
sampler's exact `nvidia-smi` query into a file in a fresh directory under the
cluster's base run directory; the login node then reads every file back. A job has
a two-minute limit, is cancelled if it has not ended when the wait is over, and
the directory is removed afterwards.
"""

import logging
import secrets
import shlex
import time
from dataclasses import dataclass, field

from clusters.inventory import PartitionLimits
from clusters.slurm import Node, Slurm, SlurmError, SqueueRow
from clusters.ssh import SSHError

logger = logging.getLogger(__name__)

PROBE_WAIT = 180.0  # seconds the test jobs may take, queueing included
PROBE_TIME_LIMIT_MINUTES = 2
MAX_PROBE_NODES = 16  # past this, the first nodes of each partition
MAX_FILE_BYTES = 64 * 1024
POLL_SECONDS = 1.0
READ_BACK_TRIES = 5  # a shared filesystem may show a file a moment after its writer ended
_LIVE = frozenset({"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "RESIZING"})
_MARK = "==> "
_PYTHON_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3], sys.executable)"


@dataclass(frozen=True)
class NodeProbe:
    """What one node's test job did, and what it wrote (if the login node could read it)."""

    node: str
    partition: str
    gpus: int
    job_id: str = ""
    state: str = ""  # Slurm's last word on the job, e.g. COMPLETED, or why it never ran
    wrote: bool = False
    python: str = ""  # "3.11.2 /usr/bin/python3", or "" when none was found
    gpu_exit: str = ""
    gpu_lines: tuple[str, ...] = ()


@dataclass
class ProbeOutcome:
    run_dir: str = ""  # the base run directory, absolute, on the login node
    error: str = ""  # the test jobs could not be started at all: why
    nodes: list[NodeProbe] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # nodes not taking jobs, or past the cap

    @property
    def job_ids(self) -> list[str]:
        return [probe.job_id for probe in self.nodes if probe.job_id]


def probe_targets(
    limits: dict[str, PartitionLimits], nodes: list[Node]
) -> tuple[list[NodeProbe], list[str]]:
    """Each available node once, in the first up partition that has it; (targets, skipped)."""
    targets: list[NodeProbe] = []
    seen: set[str] = set()
    skipped: list[str] = []
    for partition in limits:
        members = [node for node in nodes if partition in node.partitions]
        for node in members:
            if node.name in seen:
                continue
            seen.add(node.name)
            if not node.is_available:
                skipped.append(f"{node.name} ({node.state})")
            elif len(targets) >= MAX_PROBE_NODES:
                skipped.append(f"{node.name} (past the first {MAX_PROBE_NODES})")
            else:
                targets.append(NodeProbe(node=node.name, partition=partition, gpus=node.gpus))
    return targets, skipped


def probe_script(
    target: NodeProbe, *, probe_dir: str, name: str, gpu_fields: tuple[str, ...]
) -> str:
    """The test job's batch script for one node."""
    gres = ["#SBATCH --gres=gpu:1"] if target.gpus else []
    query = ",".join(gpu_fields)
    gpu = (
        [
            'ids="${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}"',
            "if command -v nvidia-smi >/dev/null 2>&1; then",
            f"  TZ=UTC nvidia-smi --query-gpu={query} --format=csv,noheader,nounits"
            ' ${ids:+-i "$ids"} > "$tmp.gpu" 2>&1',
            '  echo "gpu-exit $?"',
            '  head -n 64 "$tmp.gpu" | sed "s/^/gpu /"',
            "else",
            '  echo "gpu-exit not found on PATH ($PATH)"',
            "fi",
        ]
        if target.gpus and gpu_fields
        else []
    )
    lines = [
        "#!/bin/bash",
        f"#SBATCH --job-name={name}",
        f"#SBATCH --partition={target.partition}",
        f"#SBATCH --nodelist={target.node}",
        "#SBATCH --nodes=1",
        "#SBATCH --ntasks=1",
        "#SBATCH --cpus-per-task=1",
        f"#SBATCH --time={PROBE_TIME_LIMIT_MINUTES}",
        *gres,
        "#SBATCH --output=/dev/null",
        "#SBATCH --error=/dev/null",
        "#SBATCH --chdir=/tmp",
        f"dir={shlex.quote(probe_dir)}",
        'node="${SLURMD_NODENAME:-$(hostname -s)}"',
        'tmp="$(mktemp)" || exit 1',
        "{",
        '  echo "node $node"',
        "  if command -v python3 >/dev/null 2>&1; then",
        f"    v=$(python3 -c {shlex.quote(_PYTHON_VERSION)} 2>&1 | head -n 1)",
        '    echo "python $v"',
        "  fi",
        *(f"  {line}" for line in gpu),
        '} > "$tmp.out"',
        # Written whole, then renamed: the login node never reads half a file.
        'cp "$tmp.out" "$dir/.$node.part" && mv "$dir/.$node.part" "$dir/$node.txt"',
        "status=$?",
        'rm -f "$tmp" "$tmp.out" "$tmp.gpu"',
        "exit $status",
    ]
    return "\n".join(lines) + "\n"


def _read_back(slurm: Slurm, probe_dir: str) -> dict[str, list[str]]:
    """node -> the lines its test job wrote, as the login node sees them."""
    command = (
        f'cd {shlex.quote(probe_dir)} && for f in *.txt; do [ -f "$f" ] || continue; '
        f'printf "{_MARK}%s\\n" "$f"; head -c {MAX_FILE_BYTES} "$f"; echo; done'
    )
    result = slurm.connection.run(command, timeout=slurm.timeout)
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in result.text.splitlines():
        if line.startswith(_MARK) and line.endswith(".txt"):
            current = files.setdefault(line[len(_MARK) : -len(".txt")], [])
        elif current is not None and line.strip():
            current.append(line)
    return files


def _with_file(probe: NodeProbe, lines: list[str]) -> NodeProbe:
    python = next((line[len("python ") :] for line in lines if line.startswith("python ")), "")
    gpu_exit = next(
        (line[len("gpu-exit ") :] for line in lines if line.startswith("gpu-exit ")), ""
    )
    gpu_lines = tuple(line[len("gpu ") :] for line in lines if line.startswith("gpu "))
    return NodeProbe(
        node=probe.node, partition=probe.partition, gpus=probe.gpus, job_id=probe.job_id,
        state=probe.state, wrote=True, python=python, gpu_exit=gpu_exit, gpu_lines=gpu_lines,
    )  # fmt: skip


def _with_state(probe: NodeProbe, state: str) -> NodeProbe:
    return NodeProbe(node=probe.node, partition=probe.partition, gpus=probe.gpus,
                     job_id=probe.job_id, state=state)  # fmt: skip


def _state_of(row: SqueueRow) -> str:
    exit_code = f", exit {row.exit_code}" if row.exit_code else ""
    reason = f", {row.reason}" if row.reason and row.reason not in ("None", "(null)") else ""
    return f"{row.state}{exit_code}{reason}"


def _wait(slurm: Slurm, probes: list[NodeProbe], wait: float) -> list[NodeProbe]:
    """Until every job has ended or the wait is over; what Slurm said of each."""
    ids = [probe.job_id for probe in probes if probe.job_id]
    last: dict[str, SqueueRow] = {}
    deadline = time.monotonic() + wait
    while ids:  # asked at least once, however short the wait
        rows = {row.job_id: row for row in slurm.queue(ids)}
        last.update(rows)
        if not any(row.state in _LIVE for row in rows.values()) or time.monotonic() >= deadline:
            break
        time.sleep(POLL_SECONDS)
    updated = []
    for probe in probes:
        row = last.get(probe.job_id)
        if not probe.job_id:
            updated.append(probe)
        elif row is not None and row.state in _LIVE:
            waited = f"still {_state_of(row)} after {wait:.0f} s; cancelled"
            updated.append(_with_state(probe, waited))
        else:
            updated.append(_with_state(probe, _state_of(row) if row else "ENDED"))
    return updated


def probe_nodes(
    slurm: Slurm,
    *,
    base_run_dir: str,
    limits: dict[str, PartitionLimits],
    nodes: list[Node],
    gpu_fields: tuple[str, ...],
    wait: float = PROBE_WAIT,
) -> ProbeOutcome:
    """Run the test jobs and read back what they wrote; always cancels and cleans up."""
    connection = slurm.connection
    outcome = ProbeOutcome()
    targets, outcome.skipped = probe_targets(limits, nodes)
    try:
        outcome.run_dir = connection.home_path(base_run_dir)
    except SSHError as exc:
        outcome.error = str(exc)
        return outcome
    token = secrets.token_hex(6)
    probe_dir = f"{outcome.run_dir}/.readiness-{token}"
    made = connection.run(
        f"mkdir -p -- {shlex.quote(outcome.run_dir)} && mkdir -m 0700 -- {shlex.quote(probe_dir)}",
        timeout=slurm.timeout,
    )
    if made.exit_status != 0:
        outcome.error = f"the login node cannot create {probe_dir}: {made.error_text.strip()[:300]}"
        return outcome
    submitted: list[str] = []  # cancelled at the end, whatever fails on the way
    try:
        started = []
        for target in targets:
            script = f"{probe_dir}/{target.node}.sbatch"
            text = probe_script(
                target, probe_dir=probe_dir, name=f"portal-readiness-{token}", gpu_fields=gpu_fields
            )
            connection.upload(script, text.encode(), mode=0o700)
            try:
                job_id = slurm.submit(script)
            except SlurmError as exc:
                started.append(_with_state(target, f"refused by sbatch: {exc.slurm_message}"))
                continue
            submitted.append(job_id)
            started.append(
                NodeProbe(
                    node=target.node, partition=target.partition, gpus=target.gpus, job_id=job_id
                )
            )
        outcome.nodes = _wait(slurm, started, wait)
        for _ in range(READ_BACK_TRIES):
            files = _read_back(slurm, probe_dir)
            if all(probe.node in files for probe in outcome.nodes if probe.job_id):
                break
            time.sleep(POLL_SECONDS)
        outcome.nodes = [
            _with_file(probe, files[probe.node]) if probe.node in files else probe
            for probe in outcome.nodes
        ]
    finally:
        _clean_up(slurm, submitted, probe_dir)
    return outcome


def _clean_up(slurm: Slurm, job_ids: list[str], probe_dir: str) -> None:
    for job_id in job_ids:
        try:
            slurm.cancel(job_id)  # an ended job counts as cancelled
        except (SlurmError, SSHError) as exc:
            logger.warning("readiness test job %s not cancelled: %s", job_id, exc)
    try:
        slurm.connection.run(f"rm -rf -- {shlex.quote(probe_dir)}", timeout=slurm.timeout)
    except SSHError as exc:
        logger.warning("readiness directory %s not removed: %s", probe_dir, exc)
