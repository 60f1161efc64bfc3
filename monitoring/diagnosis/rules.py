"""The table of failures a diagnosis knows: an ordered tuple of rules, first match wins.

To teach the portal a new failure, add a `Rule` (a class, the Slurm states and/or
log clues that reveal it, a one-line explanation and the fixes to try) and a
test with a log as the tool really prints it. Clues are the stable core of a
message (`CUDA out of memory`, an errno phrase in an NCCL context), not a whole
line of one version, and every pattern is linear: literals, alternations and
single character-class runs, never a quantified group that can backtrack; a pattern
that begins with a literal (not `\b`) is found by a fast scan. The engine that applies
the table is `monitoring.diagnosis.diagnose`.
"""

import re
from collections.abc import Callable
from dataclasses import dataclass

from jobs.enums import FailureClass, State
from monitoring.diagnosis.log_scan import WINDOW_LINES as WINDOW


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


def _failed(state: str, exit_code: int | None) -> bool:
    return state in (State.FAILED, State.OUT_OF_MEMORY) or bool(exit_code)


def _not_cancelled(state: str, exit_code: int | None) -> bool:
    return state != State.CANCELLED or bool(exit_code)


def _p(*patterns: str) -> tuple[Clue, ...]:
    return tuple(Clue(re.compile(p, re.M)) for p in patterns)


# A distributed-runtime context (NCCL, c10d, gloo, the TCP store) and the network errno
# phrases in the wordings libc, NCCL, gloo and c10d print them.
_DISTRIBUTED = re.compile(
    r"NCCL|nccl|c10d|ProcessGroup|[Gg]loo|TCPStore|DistBackendError|DistNetworkError"
    r"|DistStoreError|torch\.distributed|[Rr]endezvous|NET/(?:IB|OFI|Socket)"
)
_NETWORK = (
    r"Connection reset by peer|Broken pipe|No route to host|Connection refused"
    r"|Connection timed out|Connection closed by (?:remote )?peer|Connection aborted"
    r"|Software caused connection abort|Network is unreachable|Host is unreachable"
    r"|Name or service not known|Temporary failure in name resolution|network error"
    r"|Cannot assign requested address"
    r"|errno: (?:32|99|101|104|110|111|113)\b|\b(?:ECONNRESET|ECONNREFUSED|ETIMEDOUT"
    r"|EHOSTUNREACH|ENETUNREACH|EPIPE)\b|Got completion from peer|completed with error"
)
_TIMED_OUT = (
    r"timed out|[Tt]ime ?out (?:after|at|of|while|waiting)\b|[Tt]imeout(?:Error|Exception)?: "
)

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
        FailureClass.PREEMPTION,
        "Preempted",
        "A higher-priority job took the job's nodes.",
        (
            "Resume from the latest checkpoint (a restart policy does this for you).",
            "Checkpoint often, or run in a partition or QOS that is not preemptible.",
        ),
        states=frozenset({State.PREEMPTED}),
        patterns=_p(r"CANCELLED AT \S+ DUE TO PREEMPTION"),
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
        # Every Slurm since 2.x: `*** JOB 1 ON n1 CANCELLED AT <time> DUE TO TIME LIMIT ***`,
        # older ones without `ON n1` (and with `on n1` after the reason).
        patterns=_p(r"CANCELLED AT \S+ DUE TO TIME LIMIT", r"\bJob \d+ exceeded \S+ time limit"),
    ),
    Rule(
        FailureClass.DEVICE_ASSERT,
        "Device-side assert",
        "A check inside a GPU kernel failed (a device-side assert): almost always an index "
        "out of range, such as a token id past the embedding's size or a label past the "
        "number of classes. It is the code or the data, not the node; the traceback may "
        "point at a later call, since CUDA reports kernel errors asynchronously.",
        (
            "Rerun with CUDA_LAUNCH_BLOCKING=1 (slower) so that the traceback stops at the "
            "operation that failed; the kernel's `Assertion ... failed` line names it too.",
            "Check every index against the size it indexes: token ids against the vocabulary "
            "and embedding size (after adding tokens, model.resize_token_embeddings), class "
            "labels against the number of classes (0 to C-1; -100 only where the loss "
            "ignores it), gather/index_select indices against their dimension.",
            "Assert the ranges in the data pipeline (e.g. `assert labels.max() < num_classes`), "
            "or run one failing batch on the CPU: it raises a plain IndexError naming the value.",
        ),
        # The kernel's own line (CUDA's device printf: `file.cu:1515: kernel: block: [0,0,0],
        # thread: [1,0,0] Assertion `cond` failed.`), then the runtime's error, as torch
        # (RuntimeError, torch.AcceleratorError), the runtime and the driver API name it.
        patterns=_p(
            r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `",
            r"device-side assert triggered",
            r"cudaErrorAssert\b",
            r"CUDA_ERROR_ASSERT\b",
        ),
        when=_failed,
    ),
    Rule(
        FailureClass.GPU_HARDWARE,
        "GPU hardware fault",
        "A GPU of the node reported a hardware or driver fault (Xid, ECC, a lost GPU); the "
        "node is suspect, and running there again may fail the same way.",
        (
            "Restart without the node (the restart after a GPU fault excludes it for you).",
            "Tell the cluster admins the node and the error shown here, so that they check "
            "the GPU (nvidia-smi -q, dcgmi diag) and drain the node.",
            "If it happens on every node, suspect the code instead: rerun with "
            "CUDA_LAUNCH_BLOCKING=1 (and compute-sanitizer) to find an out-of-bounds kernel.",
        ),
        patterns=(
            *_p(
                r"NVRM: Xid\b",
                r"\bXid[ :(]+\d",
                r"fallen off the bus",
                r"GPU is lost\b",
                r"[Uu]ncorrectable ECC",
                r"\bECC error",
                r"[Dd]ouble[- ]bit ECC",
                r"[Uu]ncorrectable NVLink",
                r"an illegal memory access was encountered",
                r"CUDA error: unknown error",
                r"cudaErrorUnknown|CUDA_ERROR_UNKNOWN|cudaErrorECCUncorrectable",
                r"THCudaCheck FAIL file=\S+ line=\d+ error=\d+ : unknown error",
            ),
        ),
        when=_not_cancelled,
    ),
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
            r"^srun: error: Node failure on ",
            r"CANCELLED AT \S+ DUE TO NODE FAIL",
            r"\bJobState=NODE_FAIL\b|\bState: NODE_FAIL\b|, NODE_FAIL\b",
        ),
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
        # torch 0.3 to 2.x, the CUDA runtime and driver codes, cuBLAS/cuDNN, caffe's
        # `Check failed: error == cudaSuccess (2 vs. 0)  out of memory`, NCCL, JAX/TF.
        patterns=_p(
            r"CUDA out of memory",
            r"CUDA error: out of memory",
            r"torch\.(?:cuda\.)?OutOfMemoryError\b",
            r"THCudaCheck FAIL file=\S+ line=\d+ error=\d+ : out of memory",
            r"cudaSuccess \(2 vs\. 0\) +out of memory",
            r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY",
            r"CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED",
            r"NCCL WARN Cuda failure '?out of memory",
            r"ResourceExhaustedError: OOM when allocating|RESOURCE_EXHAUSTED: Out of memory",
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
        # slurmstepd: `Detected 1 oom-kill event(s) in step 1.0 cgroup` (before 21.08),
        # `Detected 2 oom_kill events in StepId=1.0` (after); jobacct_gather's `exceeded
        # memory limit (x > y), being killed`; the kernel's own lines.
        patterns=_p(
            r"Detected \d+ oom[-_]kill event",
            r"\b(?:Job|Step) \S+ exceeded memory limit \(\d+ > \d+\), being killed",
            r"Exceeded (?:job|step) memory limit\b(?! at some point)",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: Out Of Memory",
            r"oom[-_]kill(?:er)?\b.{0,200}Killed process",
            r"Out of memory: Kill(?:ed)? process \d+",
            r"DataLoader worker \(pid \d+\) is killed by signal: Killed",
        ),
    ),
    Rule(
        FailureClass.DIVERGED,
        "Diverged (NaN or inf)",
        "The loss or the gradients became NaN or infinite and the trainer stopped: the run "
        "diverged (a learning rate too high for this point, an fp16 overflow, a bad batch, "
        "a log or a division of zero).",
        (
            "Look at the loss and grad-norm charts for where it started to rise; resume from a "
            "checkpoint before that with a lower learning rate or a longer warm-up (and skip "
            "the batches around the failure if one batch caused it).",
            "Clip gradients (torch.nn.utils.clip_grad_norm_(params, 1.0)).",
            "Prefer bf16 to fp16 (fp16 overflows past 65504) or keep a loss scaler; compute "
            "softmax, log and norms in fp32 and add an eps to divisions and logs.",
            "Find the first operation that makes a NaN with torch.autograd.set_detect_anomaly"
            "(True) (slow), and check the inputs for NaN or inf.",
        ),
        # Python's FloatingPointError (a trainer's NaN check, fairseq's `Minimum loss scale
        # reached`, numpy's seterr), autograd's anomaly mode, DeiT/MAE-style `Loss is nan,
        # stopping training` before sys.exit(1), Megatron-LM's grad-norm check, DeepSpeed's
        # fp16 loss scale at its floor, MMCV's CheckInvalidLossHook, Lightning's
        # detect_nan_parameters.
        patterns=_p(
            r"FloatingPointError\b",
            r"returned nan values in its \w+ output",
            r"Loss is -?(?:nan|inf), stopping training",
            r"found NaN in local grad norm",
            r"Current loss scale already at minimum",
            r"loss become infinite or NaN",
            r"Detected nan and/or inf values in ",
        ),
        when=_failed,
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
        # Before the NCCL rule: c10d says it as a DistNetworkError.
        patterns=_p(r"EADDRINUSE|[Aa]ddress already in use|errno: 98\b"),
        when=_failed,
    ),
    Rule(
        FailureClass.NCCL_TIMEOUT,
        "NCCL timeout",
        "A collective operation did not finish in time: a rank could not reach the others, "
        "hung, or was far slower (the NCCL watchdog then ended the job).",
        NCCL_FIXES,
        patterns=(
            *_p(
                r"Watchdog caught collective operation timeout",
                r"ncclSystemError: System call \(e\.g\. socket, malloc\) or external library "
                r"call failed",
                r"DistNetworkError\b",
                r"The client socket has timed out after \d+m?s while trying to connect",
                r"Timed out waiting \d+ms for recv operation to complete",
            ),
            # A timeout or a network errno phrase, said by (or just under) the distributed
            # runtime: `NCCL WARN Net : Call to recv ... failed : Broken pipe`, c10d's
            # `RuntimeError: Connection reset by peer` under a distributed_c10d.py frame.
            Clue(re.compile(_TIMED_OUT), context=_DISTRIBUTED),
            # ncclSystemError as torch reports it: a socket call failed (the errno follows).
            Clue(re.compile(r"unhandled system error"), context=_DISTRIBUTED),
            Clue(re.compile(_NETWORK), context=_DISTRIBUTED, before=WINDOW),
        ),
        echo_of_kill=True,
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
        # `ModuleNotFoundError: No module named 'x'`, Python 2's `ImportError: No module
        # named x`, and `python -m x`'s `/usr/bin/python: No module named x`.
        patterns=_p(
            r"(?:ModuleNotFoundError|ImportError): No module named\b",
            r"python[\w.]*: No module named\b",
            r"python[\w.]*: Error while finding module specification for\b",
            r"\bImportError: ",
        ),
        when=_failed,
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
            r"FileNotFoundError\b",
            r"can't open file .{0,500}\[Errno 2\]",
            r"\[Errno 2\] No such file or directory",
            r": No such file or directory$",
            r": command not found$",
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
        # The failure table's root cause is the evidence when there is one (the engine
        # reads it); else the agent's line, the ChildFailedError, srun's task line.
        weaker=_p(
            r"Root Cause \(first observed failure\)",
            r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\)",
            r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: Exited with exit code [1-9]",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: (?:Killed|Segmentation fault|Aborted)",
        ),
        when=_failed,
    ),
    Rule(
        FailureClass.CANCELLED,
        "Cancelled",
        "The job was cancelled (by its owner, an admin, or scancel).",
        ("Nothing to fix if this was intended; resubmit or clone the job to run it again.",),
        states=frozenset({State.CANCELLED}),
        # A cancel without a reason (`*** JOB 3 ON c1 CANCELLED AT <time> ***`): the job's
        # line, else its step's.
        patterns=_p(r"\*\*\* JOB \S+ (?:ON \S+ )?CANCELLED AT \S+ \*\*\*"),
        weaker=_p(r"\*\*\* STEP \S+ (?:ON \S+ )?CANCELLED AT \S+ \*\*\*"),
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
