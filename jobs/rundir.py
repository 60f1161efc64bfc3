"""The run directory and the wire formats: one place for every name the parts share.

What an attempt's directory on the cluster holds (file names), how the agent
request names what it reads (file keys), how the ingest names the series it
writes (the GPU series name, built and parsed here only), and the channel
group a job's live deltas go to. The batch script, the poll, monitoring and
the job page's JavaScript (through `page_formats`, rendered with json_script)
all read these.
"""

import re
from dataclasses import dataclass
from typing import Any
from uuid import UUID

# --- files in an attempt's run directory (mode 0700) -----------------------------------------

SCRIPT_FILE = "job.sbatch"
STDOUT_FILE = "stdout.log"
EXIT_CODE_FILE = "exit_code"
METRICS_FILE = "metrics.jsonl"
CHECKPOINT_DIR = "checkpoints"
# The Slurm job id, written by the batch script when it starts: a retried
# submission finds a job that already ran and left squeue by it.
SLURM_JOB_ID_FILE = "slurm_job_id"
GPU_FILE_PREFIX = "gpu-"  # gpu-<node>.csv, one per node
GPU_FILE_SUFFIX = ".csv"
GPU_FILE_GLOB = f"{GPU_FILE_PREFIX}*{GPU_FILE_SUFFIX}"
GPU_SAMPLER_LOG = "gpu-sampler.log"
# What the per-node sampler asks nvidia-smi for: the columns of gpu-<node>.csv, in order.
GPU_QUERY_FIELDS = (
    "timestamp",
    "index",
    "uuid",
    "utilization.gpu",
    "memory.used",
    "memory.total",
    "temperature.gpu",
    "power.draw",
    # GPU faults (monitoring.nodes): counts since the driver loaded, and whether pages wait to
    # be retired; "[N/A]" where a GPU has no ECC or retires no pages (Ampere on remaps rows).
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.corrected.volatile.total",
    "retired_pages.pending",
)
# Lines of a sampler started before the fault fields were asked for: the first columns only.
GPU_QUERY_FIELDS_BEFORE_FAULTS = 8
# Slurm's warning before the time limit goes to the batch shell, which passes it on
# to the job's steps: the trainer checkpoints and exits before it is killed.
WARNING_SIGNAL = "USR1"
# The batch shell prints this into stdout.log when the warning arrives; the diagnosis reads it.
WARNING_MARKER = f"portal: SIG{WARNING_SIGNAL} before the time limit"
# Per-rank progress (portal_metrics.heartbeat): progress/rank-<R>.json, one fixed-size record.
PROGRESS_DIR = "progress"
# Per-rank stack dumps (portal_metrics.install_stack_dump): stacks/rank-<R>.txt, written by
# faulthandler when the portal sends STACK_SIGNAL to the job (scancel --signal --full).
STACKS_DIR = "stacks"
STACK_SIGNAL = "USR2"
# The job's code snapshot: uploaded as code.tar, unpacked into code/ (the command's working
# directory), the archive removed once unpacked.
CODE_ARCHIVE_FILE = "code.tar"
CODE_DIR = "code"
# The preflight of a job that asks for one (jobs.preflight): the script beside the others,
# each node's result in preflight/<node>.json, all of them merged into preflight.json by the
# batch shell before the command; a failing preflight ends the batch script with this status.
PREFLIGHT_SCRIPT = "portal_preflight.py"
PREFLIGHT_DIR = "preflight"
PREFLIGHT_FILE = "preflight.json"
PREFLIGHT_LOG = "preflight.log"
PREFLIGHT_EXIT = 86
# The command's working directory (the code directory, or the account's home), written as the
# command starts: where trainers' own files (TensorBoard events, metrics.csv) are looked for.
WORKDIR_FILE = "workdir"


@dataclass(frozen=True)
class RunDir:
    path: str  # absolute, on the cluster's shared filesystem

    def file(self, name: str) -> str:
        return f"{self.path.rstrip('/')}/{name}"


def progress_file(rank: int) -> str:
    return f"{PROGRESS_DIR}/rank-{rank}.json"


def stack_file(rank: int) -> str:
    return f"{STACKS_DIR}/rank-{rank}.txt"


def gpu_file(node: str) -> str:
    """The file the GPU sampler of `node` writes."""
    return f"{GPU_FILE_PREFIX}{node}{GPU_FILE_SUFFIX}"


def gpu_file_node(name: str) -> str | None:
    """The node a GPU sampler file belongs to; None if `name` is not one."""
    fits = len(name) >= len(GPU_FILE_PREFIX) + len(GPU_FILE_SUFFIX)
    if fits and name.startswith(GPU_FILE_PREFIX) and name.endswith(GPU_FILE_SUFFIX):
        return name[len(GPU_FILE_PREFIX) : -len(GPU_FILE_SUFFIX)]
    return None


def is_gpu_file(name: str) -> bool:
    return gpu_file_node(name) is not None


# --- keys of what one agent call reads ---------------------------------------------------------


def file_key(attempt_uuid: UUID | str, name: str) -> str:
    """How a request names a file (or listing) of an attempt, and its reply finds it again."""
    return f"{attempt_uuid}/{name}"


def run_dir_key(attempt_uuid: UUID | str) -> str:
    """How a request names the listing of an attempt's run directory itself."""
    return str(attempt_uuid)


# --- series names ----------------------------------------------------------------------------

GPU_SERIES_PREFIX = "gpu/"
# Plain groups (node, index, metric): the same pattern works in Python and JavaScript.
_GPU_SERIES = re.compile(r"^gpu/([^/]+)/(\d+)/([^/]+)$")


@dataclass(frozen=True)
class GpuSeries:
    """One GPU's metric: the series `gpu/<node>/<index>/<metric>`."""

    node: str
    index: int
    metric: str

    @property
    def name(self) -> str:
        return f"{GPU_SERIES_PREFIX}{self.node}/{self.index}/{self.metric}"


def gpu_series(name: str) -> GpuSeries | None:
    """The GPU a series name is about; None for a training metric's series."""
    found = _GPU_SERIES.match(name)
    if found is None:
        return None
    node, index, metric = found.groups()
    return GpuSeries(node, int(index), metric)


# --- live pushes -------------------------------------------------------------------------------


def job_group(job_id: int) -> str:
    """The channel group the poller sends a job's deltas to."""
    return f"job.{job_id}"


def page_formats() -> dict[str, Any]:
    """What the job page's JavaScript needs of these names (rendered with json_script)."""
    return {
        "logFile": STDOUT_FILE,
        "gpuSeriesPrefix": GPU_SERIES_PREFIX,
        "gpuSeriesPattern": _GPU_SERIES.pattern,
    }
