"""The table of failures a diagnosis knows: an ordered tuple of rules, first match wins.

To teach the portal a new failure, add a `Rule` (a class, the Slurm states and/or
log clues that reveal it, a one-line explanation and the fixes to try) and a
test with a log as the tool really prints it. Clues are the stable core of a
message (`CUDA out of memory`, an errno phrase in an NCCL context), not a whole
line of one version, and every pattern is linear: literals, alternations and
single character-class runs, never a quantified group that can backtrack; a pattern
that begins with a literal (not `\b`) is found by a fast scan. The engine that applies
the table is `monitoring.diagnosis.diagnose`; a rule's parts are
`monitoring.diagnosis.clues`'s, and the distributed runtime's rules
`monitoring.diagnosis.network`'s.
"""

from jobs.enums import FailureClass, State
from monitoring.diagnosis.clues import Rule, clues, failed, not_cancelled
from monitoring.diagnosis.network import ADDRESS_IN_USE, NCCL_ERROR, NCCL_TIMEOUT

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
        patterns=clues(r"CANCELLED AT \S+ DUE TO PREEMPTION"),
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
        patterns=clues(r"CANCELLED AT \S+ DUE TO TIME LIMIT", r"\bJob \d+ exceeded \S+ time limit"),
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
        patterns=clues(
            r"block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `",
            r"device-side assert triggered",
            r"cudaErrorAssert\b",
            r"CUDA_ERROR_ASSERT\b",
        ),
        when=failed,
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
            *clues(
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
        when=not_cancelled,
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
        patterns=clues(
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
        patterns=clues(
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
        patterns=clues(
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
        patterns=clues(
            r"FloatingPointError\b",
            r"returned nan values in its \w+ output",
            r"Loss is -?(?:nan|inf), stopping training",
            r"found NaN in local grad norm",
            r"Current loss scale already at minimum",
            r"loss become infinite or NaN",
            r"Detected nan and/or inf values in ",
        ),
        when=failed,
    ),
    Rule(
        FailureClass.RANK_CRASH,
        "A rank crashed: bus error",
        "A process of the job died of a bus error (SIGBUS): most often the DataLoader's "
        "worker processes ran out of shared memory (/dev/shm, small on many nodes), else a "
        "memory-mapped file changed or vanished under it, or the node is bad. The other "
        "ranks' NCCL errors that may follow are its echo.",
        (
            "Use fewer DataLoader workers (num_workers) or a smaller prefetch_factor and batch: "
            "the workers hand every batch to the trainer through /dev/shm.",
            "Check the node's shared memory (df -h /dev/shm in the job) and ask for more memory "
            "(--mem): on many clusters /dev/shm is counted in the job's memory.",
            "If it happens with num_workers=0 too, or on one node only, exclude that node when "
            "restarting and tell the admins.",
            "Resume from the latest checkpoint (a restart policy does this for you).",
        ),
        # Before the NCCL rule: the peers of the dead rank then fail in their collectives. In
        # any state: a bus error is never a cancel's doing.
        # srun's task line (`srun: error: n1: task 0: Bus error (core dumped)`), bash's
        # (`line 12: 4242 Bus error (core dumped) python train.py`), the DataLoader's
        # (`DataLoader worker (pid 7579) is killed by signal: Bus error.`, and its worker's
        # `ERROR: Unexpected bus error encountered in worker.`), faulthandler's.
        patterns=clues(r"\bBus error\b", r"Unexpected (?:bus|BUS) error encountered in "),
    ),
    ADDRESS_IN_USE,
    NCCL_TIMEOUT,
    NCCL_ERROR,
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
        patterns=clues(
            r"(?:ModuleNotFoundError|ImportError): No module named\b",
            r"python[\w.]*: No module named\b",
            r"python[\w.]*: Error while finding module specification for\b",
            r"\bImportError: ",
        ),
        when=failed,
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
        patterns=clues(
            r"FileNotFoundError\b",
            r"can't open file .{0,500}\[Errno 2\]",
            r"\[Errno 2\] No such file or directory",
            r": No such file or directory$",
            r": command not found$",
        ),
        when=failed,
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
        weaker=clues(
            r"Root Cause \(first observed failure\)",
            r"failed \(exitcode: -?\d+\) local_rank: \d+ \(pid: \d+\)",
            r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: Exited with exit code [1-9]",
            r"^srun: error: [\w.-]+: tasks? [\d,-]+: (?:Killed|Segmentation fault|Aborted"
            r"|Illegal instruction|Floating point exception)",
        ),
        when=failed,
    ),
    Rule(
        FailureClass.CANCELLED,
        "Cancelled",
        "The job was cancelled (by its owner, an admin, or scancel).",
        ("Nothing to fix if this was intended; resubmit or clone the job to run it again.",),
        states=frozenset({State.CANCELLED}),
        # A cancel without a reason (`*** JOB 3 ON c1 CANCELLED AT <time> ***`): the job's
        # line, else its step's.
        patterns=clues(r"\*\*\* JOB \S+ (?:ON \S+ )?CANCELLED AT \S+ \*\*\*"),
        weaker=clues(r"\*\*\* STEP \S+ (?:ON \S+ )?CANCELLED AT \S+ \*\*\*"),
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
