"""The batch script of an attempt, rendered from its job's spec.

User values reach the script in two ways only: as shell code the user wrote
to run (the command and set-up lines, written verbatim into the script file,
never into a command line), or as data, always through `shlex.quote`.
"""

import re
import shlex
from datetime import timedelta

from jobs.enums import Template
from jobs.interactive import session_command_lines
from jobs.models import Attempt, Job
from jobs.preflight import preflight_exit_guard, preflight_lines
from jobs.rundir import (
    CHECKPOINT_DIR,
    CODE_DIR,
    EXIT_CODE_FILE,
    GPU_FILE_PREFIX,
    GPU_FILE_SUFFIX,
    GPU_QUERY_FIELDS,
    GPU_SAMPLER_LOG,
    METRICS_FILE,
    PROGRESS_DIR,
    SLURM_JOB_ID_FILE,
    STACK_SIGNAL,
    STACKS_DIR,
    STDOUT_FILE,
    WARNING_MARKER,
    WARNING_SIGNAL,
    WORKDIR_FILE,
    RunDir,
)
from portal_lib.rendezvous import master_port_shell

GPU_SAMPLE_SECONDS = 1
_NODE_LIST = re.compile(r"^[A-Za-z0-9_.\[\],-]+$")


def slurm_time(limit: timedelta) -> str:
    """`D-HH:MM:SS`, rounded up to whole seconds (at least one minute)."""
    seconds = max(60, int(-(-limit.total_seconds() // 1)))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"


def warning_seconds(limit: timedelta) -> int:
    """How long before the time limit Slurm warns: a tenth of it, 10 s to 5 min."""
    return max(10, min(300, int(limit.total_seconds() // 10)))


def _sbatch_options(job: Job, attempt: Attempt, run_dir: RunDir) -> list[str]:
    options = [
        f"--job-name={attempt.slurm_job_name}",
        f"--comment={attempt.slurm_job_name}",
        f"--nodes={job.nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={job.cpus_per_task}",
        f"--time={slurm_time(job.time_limit)}",
        f"--output={run_dir.file(STDOUT_FILE)}",
        "--open-mode=append",
        # The portal restarts failed jobs itself, as a new attempt resuming from a
        # checkpoint; a Slurm requeue would rerun the script from the start.
        "--no-requeue",
        f"--signal=B:{WARNING_SIGNAL}@{warning_seconds(job.time_limit)}",
    ]
    if attempt.excluded_nodes:
        if not _NODE_LIST.match(attempt.excluded_nodes):
            raise ValueError(f"not a node list: {attempt.excluded_nodes!r}")
        options.append(f"--exclude={attempt.excluded_nodes}")
    if job.gpus_per_node:
        options.append(f"--gres=gpu:{job.gpus_per_node}")
    if job.memory_mb:
        options.append(f"--mem={job.memory_mb}M")
    if job.partition:
        options.append(f"--partition={job.partition}")
    if job.project.slurm_account:
        options.append(f"--account={job.project.slurm_account}")
    # #SBATCH lines are not shell: values are validated to need no quoting, and
    # quoting them anyway guards against a validator that missed something.
    return [f"#SBATCH {shlex.quote(option)}" for option in options]


# Templates launched by torchrun, one launcher per node (DeepSpeed reads the
# same RANK/LOCAL_RANK/WORLD_SIZE environment).
TORCHRUN_TEMPLATES = frozenset({Template.TORCHRUN, Template.FSDP, Template.DEEPSPEED})


# Set before the launcher for these templates; `:=` keeps a value the set-up chose.
_TEMPLATE_ENV: dict[str, list[str]] = {
    Template.FSDP: [
        "# FSDP: free all-gather buffers without record_stream; less allocator fragmentation.",
        ': "${TORCH_NCCL_AVOID_RECORD_STREAMS:=1}"',
        ': "${PYTORCH_CUDA_ALLOC_CONF:=expandable_segments:True}"',
        "export TORCH_NCCL_AVOID_RECORD_STREAMS PYTORCH_CUDA_ALLOC_CONF",
    ],
    Template.DEEPSPEED: [
        "# DeepSpeed reads RANK/LOCAL_RANK/WORLD_SIZE from torchrun (no hostfile, no pdsh);",
        "# its JIT-built ops go to a node-local cache, not a home directory all nodes race on.",
        ': "${TORCH_EXTENSIONS_DIR:=/tmp/torch-extensions-$SLURM_JOB_ID}"',
        "export TORCH_EXTENSIONS_DIR",
    ],
}


def _command_lines(job: Job) -> list[str]:
    if job.template == Template.JUPYTER:
        return session_command_lines(job)
    if job.template in TORCHRUN_TEMPLATES:
        torchrun = (
            # torchrun dies of SIGUSR1 and of the stack signal; its workers handle them:
            # torchrun ignores both (PORTAL_LAUNCHER: it dumps no stacks of its own).
            "srun --unbuffered --ntasks-per-node=1 --kill-on-bad-exit=1"
            f' bash -c \'trap "" USR1 {STACK_SIGNAL}; PORTAL_LAUNCHER=torchrun exec "$@"\''
            " portal-launch torchrun"
            ' --nnodes="$SLURM_NNODES"'
            f" --nproc_per_node={max(job.gpus_per_node, 1)}"
            " --rdzv_backend=c10d"
            ' --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT"'
            ' --rdzv_id="$SLURM_JOB_ID"'
        )
        return [*_TEMPLATE_ENV.get(job.template, []), f"{torchrun} {job.command.strip()}"]
    return job.command.strip().splitlines()


def _gpu_sampler(job: Job) -> list[str]:
    """One nvidia-smi per node, beside the job's steps, on the job's own GPUs."""
    if not job.gpus_per_node:
        return []
    query = ",".join(GPU_QUERY_FIELDS)
    sampler = (
        # The warning signal reaches every step: the sampler must outlive it. env by its path:
        # the step's bash may source a ~/.bashrc the job rewrote.
        f'trap "" USR1 {STACK_SIGNAL}; '
        'ids="${SLURM_STEP_GPUS:-${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}}}"; '
        # Not a rank: it dumps no stacks into a rank's file (a stand-in may be Python).
        "exec /usr/bin/env -u PORTAL_STACKS_DIR TZ=UTC nvidia-smi"
        f" --query-gpu={query} --format=csv,noheader,nounits"
        f' -l {GPU_SAMPLE_SECONDS} ${{ids:+-i "$ids"}}'
        f' >> "$PORTAL_RUN_DIR/{GPU_FILE_PREFIX}$SLURMD_NODENAME{GPU_FILE_SUFFIX}"'
    )
    return [
        "# GPU sampler: one per node, sharing the job's resources, ending with the job.",
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        "  srun --overlap --mem=0 --ntasks-per-node=1 --cpus-per-task=1 \\",
        f"    bash -c {shlex.quote(sampler)} \\",
        f'    2>> "$PORTAL_RUN_DIR/{GPU_SAMPLER_LOG}" &',
        "  PORTAL_SAMPLER_PID=$!",
        "fi",
        "",
    ]


def _warning_trap() -> list[str]:
    return [
        f"# Slurm's warning (--signal=B:{WARNING_SIGNAL}) reaches this shell only: pass it to",
        "# every step of the job (srun'd trainers); scancel signals steps, not this shell.",
        "portal_warn() {",
        f'  echo "{WARNING_MARKER}, passed to the steps" >&2',
        f'  scancel --signal={WARNING_SIGNAL} "$SLURM_JOB_ID" || true',
        "}",
        f"trap portal_warn {WARNING_SIGNAL}",
        "",
    ]


def _code_lines(job: Job) -> list[str]:
    if not job.has_code:
        return []  # no snapshot: the command starts in the account's home directory
    return [
        "# The job's code, unpacked from its snapshot: set-up and command run in it.",
        'cd -- "$PORTAL_CODE_DIR" || exit 1',
        "",
    ]


def render_batch_script(*, job: Job, attempt: Attempt, run_dir: RunDir) -> str:
    exports = {
        "PORTAL_JOB_ID": str(job.pk),
        "PORTAL_JOB_NAME": job.name,
        "PORTAL_ATTEMPT": str(attempt.uuid),
        "PORTAL_ATTEMPT_NUMBER": str(attempt.number),
        "PORTAL_RUN_DIR": run_dir.path,
        "PORTAL_METRICS_FILE": run_dir.file(METRICS_FILE),
        "PORTAL_CHECKPOINT_DIR": run_dir.file(CHECKPOINT_DIR),
        "PORTAL_RESUME_FROM": attempt.resume_from,
        "PORTAL_PROGRESS_DIR": run_dir.file(PROGRESS_DIR),
        "PORTAL_STACKS_DIR": run_dir.file(STACKS_DIR),
        "PORTAL_STACK_SIGNAL": STACK_SIGNAL,
    }
    if job.has_code:
        exports["PORTAL_CODE_DIR"] = run_dir.file(CODE_DIR)
    lines = [
        "#!/bin/bash",
        f"# Written by the GPU portal for job {job.pk}, attempt {attempt.number}.",
        *_sbatch_options(job, attempt, run_dir),
        "",
        *(f"export {name}={shlex.quote(value)}" for name, value in exports.items()),
        "# The run directory holds portal_metrics.py (`from portal_metrics import log`) and a",
        "# sitecustomize.py that installs its stack-dump hook in every Python of the job.",
        'export PYTHONPATH="$PORTAL_RUN_DIR${PYTHONPATH:+:$PYTHONPATH}"',
        "# Python block-buffers stdout into a file: records would reach the log in 8 KB bursts,",
        "# late and out of step with the bars. Unbuffered unless the job chose otherwise.",
        'export PYTHONUNBUFFERED="${PYTHONUNBUFFERED-1}"',
        "# srun holds a task's output until a newline (a bar's `\\r` redraws) unless unbuffered:",
        "# the same for the job's own srun lines.",
        'export SLURM_UNBUFFEREDIO="${SLURM_UNBUFFEREDIO-1}"',
        'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
        "# Below the usual ephemeral range (32768+), so no client socket holds it.",
        f"MASTER_PORT={master_port_shell()}",
        "export MASTER_ADDR MASTER_PORT",
        f'printf "%s\\n" "$SLURM_JOB_ID" > "$PORTAL_RUN_DIR/{SLURM_JOB_ID_FILE}"',
        'mkdir -p -- "$PORTAL_CHECKPOINT_DIR"',
        "",
        f"# The portal asks for stacks with SIG{STACK_SIGNAL} to the whole job: not this shell.",
        f'trap "" {STACK_SIGNAL}',
        # Before the preflight: the time limit's warning may come while it runs.
        *_warning_trap(),
        *preflight_lines(job),
        *_gpu_sampler(job),
        "# The user's set-up and command run in a subshell: whatever they do (exit",
        "# included), the status is recorded in the run directory, so the outcome is",
        "# known even on a cluster without accounting, after the job left squeue.",
        "# In the background, so the batch shell can pass signals on while it waits.",
        "(",
        *_code_lines(job),
        "# --- environment set-up (from the job spec) ---",
        *job.setup.strip().splitlines(),
        "",
        "# Where trainers' own files (TensorBoard events, metrics.csv) are looked for; not the",
        "# account's home, which every job of the account shares: its files are no one job's.",
        f'if [ "$PWD" != "$HOME" ]; then printf "%s\\n" "$PWD"; else echo; fi'
        f' > "$PORTAL_RUN_DIR/{WORKDIR_FILE}"',
        "# --- the command (from the job spec) ---",
        *_command_lines(job),
        ") &",
        "portal_child=$!",
        "portal_code=0",
        "# wait returns early (status > 128) when a trapped signal arrives: wait again.",
        'while kill -0 "$portal_child" 2>/dev/null; do wait "$portal_child"; portal_code=$?; done',
        'wait "$portal_child" 2>/dev/null; portal_last=$?',
        '[ "$portal_last" -ne 127 ] && portal_code=$portal_last',
        *preflight_exit_guard(job),
        f'printf "%s\\n" "$portal_code" > "$PORTAL_RUN_DIR/.{EXIT_CODE_FILE}.tmp"',
        f'mv -f -- "$PORTAL_RUN_DIR/.{EXIT_CODE_FILE}.tmp" "$PORTAL_RUN_DIR/{EXIT_CODE_FILE}"',
        'if [ -n "${PORTAL_SAMPLER_PID:-}" ]; then kill "$PORTAL_SAMPLER_PID" 2>/dev/null; fi',
        'exit "$portal_code"',
        "",
    ]
    return "\n".join(lines)
