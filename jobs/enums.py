"""Where a job stands and why an attempt ended: the enums rules import without the models.

Pure rules (the diagnosis, alert and hang rules, the restart policy) name states and
failure classes; importing them from here keeps those rules free of the model classes.
"""

from django.db import models


class State(models.TextChoices):
    """Where a job or attempt stands; the Slurm names where Slurm has one."""

    # In its project's line: over a concurrency limit, submitted when room frees.
    WAITING = "WAITING", "Waiting"
    QUEUED = "QUEUED", "Queued"  # in the portal, not yet handed to Slurm
    SUBMITTING = "SUBMITTING", "Submitting"
    PENDING = "PENDING", "Pending"
    RUNNING = "RUNNING", "Running"
    COMPLETING = "COMPLETING", "Completing"
    COMPLETED = "COMPLETED", "Completed"
    FAILED = "FAILED", "Failed"
    CANCELLED = "CANCELLED", "Cancelled"
    TIMEOUT = "TIMEOUT", "Time limit"
    NODE_FAIL = "NODE_FAIL", "Node failure"
    PREEMPTED = "PREEMPTED", "Preempted"
    OUT_OF_MEMORY = "OUT_OF_MEMORY", "Out of memory"
    UNKNOWN = "UNKNOWN", "Unknown"  # the cluster cannot be reached just now


FINAL_STATES = frozenset(
    {
        State.COMPLETED,
        State.FAILED,
        State.CANCELLED,
        State.TIMEOUT,
        State.NODE_FAIL,
        State.PREEMPTED,
        State.OUT_OF_MEMORY,
    }
)
# States in which Slurm holds the job: what a poll looks at.
LIVE_STATES = frozenset({State.PENDING, State.RUNNING, State.COMPLETING, State.UNKNOWN})


class Template(models.TextChoices):
    COMMAND = "command", "Command"
    TORCHRUN = "torchrun", "PyTorch DDP (torchrun)"
    FSDP = "fsdp", "PyTorch FSDP (torchrun)"
    DEEPSPEED = "deepspeed", "DeepSpeed (torchrun launcher)"
    # An interactive session (jobs.interactive): JupyterLab on the node, opened through the portal.
    JUPYTER = "jupyter", "JupyterLab session"


# The templates that train and end by themselves: what a sweep's trials may run (a session
# waits for a person, so a trial on it would never report its metric).
TRIAL_TEMPLATES = [(value, label) for value, label in Template.choices if value != Template.JUPYTER]


class FailureClass(models.TextChoices):
    """Why an attempt ended, as the diagnosis (monitoring.diagnosis.diagnose) reads it."""

    NCCL_TIMEOUT = "nccl_timeout", "NCCL timeout"
    CUDA_OOM = "cuda_oom", "CUDA out of memory"
    HOST_OOM = "host_oom", "Host out of memory"
    NODE_FAILURE = "node_failure", "Node failure"
    TIME_LIMIT = "time_limit", "Time limit"
    PREEMPTION = "preemption", "Preemption"
    ADDRESS_IN_USE = "address_in_use", "Rendezvous port in use"
    MISSING_MODULE = "missing_module", "Missing Python module"
    MISSING_FILE = "missing_file", "Missing file"
    RANK_CRASH = "rank_crash", "A rank crashed"
    GPU_HARDWARE = "gpu_hardware", "GPU hardware fault"
    DEVICE_ASSERT = "device_assert", "Device-side assert"
    DIVERGED = "diverged", "Diverged (NaN or inf)"
    HANG = "hang", "Hung (no progress on any rank)"
    # The preflight (jobs.preflight) found a node faulty: the command never ran.
    PREFLIGHT = "preflight", "Preflight found a faulty node"
    CANCELLED = "cancelled", "Cancelled"
    UNKNOWN = "unknown", "Unknown failure"


# What a restart can fix, unless the job says otherwise.
DEFAULT_RESTART_ON = (
    FailureClass.NODE_FAILURE,
    FailureClass.PREEMPTION,
    FailureClass.NCCL_TIMEOUT,
    FailureClass.RANK_CRASH,
    FailureClass.GPU_HARDWARE,
)
# Failures that would only happen again: never restarted, whatever the policy says.
NEVER_RESTART = frozenset(
    {
        FailureClass.CUDA_OOM,
        FailureClass.MISSING_MODULE,
        FailureClass.MISSING_FILE,
        FailureClass.DEVICE_ASSERT,
        FailureClass.CANCELLED,
    }
)
# Failures the portal answers by itself, never through a job's restart policy: a preflight
# that finds a faulty node submits the job again without it (jobs.preflight), using up no
# restart. Not a reason a user picks.
NOT_A_RESTART_REASON = frozenset({FailureClass.PREFLIGHT})
# The failure classes a policy may name, the default ones first in their own order (so that
# a default policy clones unchanged): the form's choices.
RESTART_REASONS = tuple(
    sorted(
        (c for c in FailureClass if c not in NEVER_RESTART | NOT_A_RESTART_REASON),
        key=lambda c: DEFAULT_RESTART_ON.index(c) if c in DEFAULT_RESTART_ON else 99,
    )
)
