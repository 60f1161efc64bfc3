"""The table of failures a diagnosis knows: an ordered tuple of rules, first match wins.

To teach the portal a new failure, add a `Rule` (a class, the Slurm states and/or
log patterns that reveal it, a one-line explanation and the fixes to try) and a
test with a log as the tool really prints it. The engine that applies the table
is `monitoring.diagnosis`.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from jobs.models import FailureClass, State


@dataclass(frozen=True)
class Rule:
    failure_class: str
    title: str
    explanation: str
    fixes: tuple[str, ...]
    states: frozenset[str] = frozenset()  # Slurm states that mean this, whatever the log says
    patterns: tuple[re.Pattern[str], ...] = ()  # any of them in the log tail
    # Only when the attempt failed this way (None: any state, e.g. the log alone decides).
    when: Callable[[str, int | None], bool] | None = None


def _failed(state: str, exit_code: int | None) -> bool:
    return state in (State.FAILED, State.OUT_OF_MEMORY) or bool(exit_code)


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, re.M) for p in patterns)


NCCL_FIXES = (
    "Check that MASTER_ADDR and MASTER_PORT are the same on every node and that MASTER_ADDR "
    "resolves and is reachable from every node (ping it, `nc -z $MASTER_ADDR $MASTER_PORT`).",
    "Open the firewall between the nodes for the rendezvous port and NCCL's ports "
    "(or allow all traffic on the cluster network).",
    "Make every node's hostname resolve to its cluster-network address: check /etc/hosts "
    "(a hostname mapped to 127.0.1.1 breaks multi-node jobs).",
    "Rerun with NCCL_DEBUG=INFO (and TORCH_DISTRIBUTED_DEBUG=DETAIL) to see which rank and "
    "which interface hang.",
    "Pin the network interface with NCCL_SOCKET_IFNAME (e.g. NCCL_SOCKET_IFNAME=ib0 or eth0) "
    "when nodes have several.",
    "If one rank is simply slower (data loading, a sick GPU), look for a straggler on the job "
    "page; raise the collective timeout only as a last resort.",
)

RULES: tuple[Rule, ...] = (
    Rule(
        FailureClass.NODE_FAILURE,
        "Node failure",
        "A node of the job stopped answering Slurm (hardware, network or slurmd failure); "
        "the job was ended for it.",
        (
            "Resume from the latest checkpoint (a restart policy does this for you).",
            "Exclude the failed node when restarting, and tell the admins so they drain it.",
        ),
        states=frozenset({State.NODE_FAIL}),
        patterns=_p(
            r"^srun: error: Node failure on .*", r"^.*CANCELLED AT \S+ DUE TO NODE FAILURE.*"
        ),
    ),
    Rule(
        FailureClass.PREEMPTION,
        "Preempted",
        "A higher-priority job took the job's nodes.",
        (
            "Resume from the latest checkpoint (a restart policy does this for you).",
            "Checkpoint often, or run in a partition or QOS that is not preemptible.",
        ),
        states=frozenset({State.PREEMPTED}),
        patterns=_p(r"^.*CANCELLED AT \S+ DUE TO PREEMPTION.*"),
    ),
    Rule(
        FailureClass.TIME_LIMIT,
        "Time limit reached",
        "The job ran into its time limit and Slurm ended it.",
        (
            "Checkpoint more often so less work is lost, and resume from the latest checkpoint.",
            "Ask for a longer time limit (within the partition's and the project's maximum).",
            "Handle the warning signal (SIGUSR1, sent before the limit) to checkpoint in time.",
        ),
        states=frozenset({State.TIMEOUT}),
        patterns=_p(r"\*\*\* (?:JOB|STEP) \S+ ON \S+ CANCELLED AT \S+ DUE TO TIME LIMIT \*\*\*"),
    ),
    Rule(
        FailureClass.CUDA_OOM,
        "CUDA out of memory",
        "A GPU ran out of memory: the model, activations or batch do not fit.",
        (
            "Use a smaller micro-batch (keep the global batch with gradient accumulation).",
            "Turn on activation checkpointing (torch.utils.checkpoint) to trade compute for "
            "memory.",
            "Shard parameters, gradients and optimizer state: FSDP or DeepSpeed ZeRO (stage 2/3).",
            "Use bf16/fp16 mixed precision; set "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation.",
        ),
        patterns=_p(
            r"torch\.(?:cuda\.)?OutOfMemoryError: CUDA out of memory.*",
            r"RuntimeError: CUDA out of memory.*",
            r"CUDA error: out of memory.*",
            r"CUBLAS_STATUS_ALLOC_FAILED.*",
            r"NCCL WARN Cuda failure 'out of memory'.*",
        ),
    ),
    Rule(
        FailureClass.HOST_OOM,
        "Host out of memory",
        "A node ran out of RAM and the kernel's OOM killer ended a process of the job.",
        (
            "Ask for more memory per node (--mem) or use fewer data-loader workers.",
            "Load the dataset lazily (memory-mapped) instead of into each rank's RAM.",
            "Load checkpoints with map_location and mmap=True so each rank does not hold a copy.",
        ),
        states=frozenset({State.OUT_OF_MEMORY}),
        patterns=_p(
            r"slurmstepd: error: Detected \d+ oom[-_]kill events? in .*",
            r"^.*oom[-_]kill(?:er)?.*Killed process.*",
            r"Out of memory: Killed process \d+.*",
            r"DataLoader worker \(pid \d+\) is killed by signal: Killed.*",
        ),
    ),
    Rule(
        FailureClass.NCCL_TIMEOUT,
        "NCCL timeout",
        "A collective operation did not finish in time: a rank could not reach the others, "
        "hung, or was far slower (the NCCL watchdog then ended the job).",
        NCCL_FIXES,
        patterns=_p(
            r"^.*Watchdog caught collective operation timeout.*",
            r"^.*ProcessGroupNCCL.*(?:timed out|Timeout).*",
            r"^.*NCCL (?:WARN|INFO).*(?:Connection timed out|connect to .* failed|"
            r"Connection refused).*",
            r"^.*ncclSystemError: System call \(e\.g\. socket, malloc\) or external library call "
            r"failed.*",
            r"^.*ncclRemoteError: A call failed possibly due to a network error.*",
            r"^.*DistNetworkError: .*(?:timed out|Connection refused|failed to connect).*",
            r"^.*torch\.distributed\.DistStoreError: .*[Tt]imed? ?out.*",
            r"^.*The client socket has timed out after \d+m?s while trying to connect to .*",
            r"^.*Timed out waiting \d+ms for recv operation to complete.*",
        ),
    ),
    Rule(
        FailureClass.ADDRESS_IN_USE,
        "Rendezvous port in use",
        "The rendezvous port (MASTER_PORT) was already taken on the first node, often by "
        "another job on the same node or a leftover process of an earlier run.",
        (
            "Pick a MASTER_PORT derived from the job id (the portal's batch script does: "
            "15000 + job id mod 15000) rather than a fixed one like 29500.",
            "Kill leftover training processes on the node, or wait for them to end.",
            "Give every node the same MASTER_PORT (torchrun --rdzv_endpoint=$MASTER_ADDR:"
            "$MASTER_PORT), unique per job, not a port per node.",
        ),
        patterns=_p(
            r"^.*(?:EADDRINUSE|[Aa]ddress already in use).*",
        ),
    ),
    Rule(
        FailureClass.MISSING_MODULE,
        "Missing Python module",
        "Python could not import a module: the job's environment lacks a package.",
        (
            "Activate the right environment in the job's set-up lines (module load, conda "
            "activate, source venv/bin/activate).",
            "Install the package into that environment on the cluster (it must be visible on "
            "every compute node, not only the login node).",
        ),
        patterns=_p(r"^.*ModuleNotFoundError: No module named .*", r"^.*ImportError: .*"),
    ),
    Rule(
        FailureClass.MISSING_FILE,
        "Missing file",
        "A file or directory the job needs does not exist on the node that ran it.",
        (
            "Use absolute paths on a filesystem shared by all nodes (not /tmp or a local disk).",
            "Check the job's working directory: it starts in the run directory unless the "
            "command changes it.",
            "Copy the script or data to the cluster first, and check the file name.",
        ),
        patterns=_p(
            r"^.*FileNotFoundError: \[Errno 2\] No such file or directory.*",
            r"^.*can't open file .*\[Errno 2\] No such file or directory.*",
            r"^.*: No such file or directory$",
            r"^.*: command not found$",
        ),
        when=_failed,
    ),
    Rule(
        FailureClass.RANK_CRASH,
        "A rank crashed",
        "One training process ended with an error or was killed, and the launcher took the "
        "whole job down with it.",
        (
            "Read the first traceback in the log (the rank named here): it is the cause, the "
            "rest are the other ranks being stopped.",
            "If it was killed by a signal (exit -9/137, -11/139), look for a sick node: check "
            "the node's health and the GPU charts, and exclude the node when restarting.",
            "Resume from the latest checkpoint (a restart policy does this for you).",
        ),
        patterns=_p(
            r"^.*torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError.*",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: Exited with exit code [1-9]\d*.*",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: (?:Killed|Segmentation fault|Aborted).*",
        ),
        when=_failed,
    ),
    Rule(
        FailureClass.CANCELLED,
        "Cancelled",
        "The job was cancelled (by its owner, an admin, or scancel).",
        ("Nothing to fix if this was intended; resubmit or clone the job to run it again.",),
        states=frozenset({State.CANCELLED}),
    ),
)

WARNED = Rule(
    FailureClass.TIME_LIMIT,
    "Stopped at the time-limit warning",
    "Slurm warned that the time limit was near; the job checkpointed and stopped before "
    "being killed, so it ended cleanly but did not finish its work.",
    (
        "Resume from the latest checkpoint (add the time limit to the job's restart "
        "policy to do this automatically).",
        "Ask for a longer time limit (within the partition's and the project's maximum).",
    ),
)

UNKNOWN = Rule(
    FailureClass.UNKNOWN,
    "Failed",
    "The job ended with an error that no rule recognises.",
    (
        "Read the end of the log for the first error or traceback.",
        "Run the command on a small scale interactively (srun --pty) to reproduce it.",
    ),
)
