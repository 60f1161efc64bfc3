"""Argument lists for Slurm commands and the checks that turn their results into SlurmErrors.

The argv lists name the command bare (`squeue`, ...); `SlurmTools.wrap` turns one into
what runs on the cluster (absolute path, clean environment). The result suits both the
portal agent (runs it without a shell) and the adapter (runs `shlex.join(argv)` over
SSH). Slurm can exit 0 while failing, so stderr is always read.
"""

import logging
import re
from datetime import UTC, datetime

from clusters.slurm.errors import AccountingDisabled, SlurmError
from clusters.slurm.parsers import (
    FIELD_SEP,
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    SacctRow,
    SqueueRow,
    parse_sacct,
    parse_squeue,
)
from clusters.ssh import CommandResult

logger = logging.getLogger(__name__)

# `-O Field:<suffix>` with no width prints the whole value (no 20-char padding or cut).
SQUEUE_FORMAT = ",".join(f"{field}:{FIELD_SEP}" for field in SQUEUE_FIELDS)
_JOB_ID = re.compile(r"\d+(?:_(?:\d+|\[[\d,\-%]+\])|\+\d+)?")
_SBATCH_ID = re.compile(r"(\d+)(?:;\S+)?")

# Messages that mean "try again later": the controller is busy, restarting or unreachable.
_TRANSIENT = (
    "Socket timed out",
    "Unable to contact slurm controller",
    "Zero Bytes were transmitted",
    "Resource temporarily unavailable",
    "Communication connection failure",
    "Connection refused",
    "Connection timed out",
    "backup controller in standby",
    "temporarily unable",
)
_ALREADY_FINISHED = (
    "Job/step already completing or completed",
    "Invalid job id specified",
)
_ACCOUNTING_DISABLED = "accounting storage is disabled"


def _job_ids(job_ids: list[str]) -> str:
    for job_id in job_ids:
        if not _JOB_ID.fullmatch(job_id):
            raise ValueError(f"not a Slurm job id: {job_id!r}")
    return ",".join(job_ids)


def squeue_argv(
    *,
    job_ids: list[str] | None = None,
    names: list[str] | None = None,
    user: str | None = None,
) -> list[str]:
    """squeue for jobs in any state Slurm still remembers (MinJobAge), for parse_squeue.

    Slurm splits --name on commas, so a name with a comma cannot be asked for exactly.
    """
    argv = ["squeue", "--states=all", "--noheader", "--noconvert"]
    argv.append(f"--Format={SQUEUE_FORMAT}")
    if job_ids is not None:
        if not job_ids:
            raise ValueError("squeue_argv: job_ids is empty; ask for no jobs by not calling it")
        argv.append(f"--jobs={_job_ids(job_ids)}")
    if names is not None:
        if not names or any(not name or "," in name for name in names):
            raise ValueError(f"squeue cannot filter on these names exactly: {names!r}")
        argv.append(f"--name={','.join(names)}")
    if user is not None:
        argv.append(f"--user={user}")
    return argv


def sacct_argv(
    *,
    job_ids: list[str] | None = None,
    since: datetime,
    names: list[str] | None = None,
    all_users: bool = False,
    duplicates: bool = False,
) -> list[str]:
    """sacct for this user's (or, `all_users`, everyone's) allocations since `since`.

    The window is always bounded: sacct without one scans the whole job history.
    `duplicates`: every record of a job id (each run of a requeued job), not the latest.
    """
    if since.tzinfo is None:
        raise ValueError("sacct_argv: `since` must be timezone-aware")
    argv = [
        "sacct",
        "--allocations",
        "--noheader",
        "--parsable2",
        f"--delimiter={FIELD_SEP}",
        f"--starttime={since.astimezone(UTC):%Y-%m-%dT%H:%M:%S}",
        "--endtime=now",
    ]
    if all_users:
        argv.append("--allusers")
    if duplicates:
        argv.append("--duplicates")
    if job_ids:
        argv.append(f"--jobs={_job_ids(job_ids)}")
    if names:
        if any(not name or "," in name for name in names):
            raise ValueError(f"sacct cannot filter on these names exactly: {names!r}")
        argv.append(f"--name={','.join(names)}")
    argv.append(f"--format={','.join(SACCT_FIELDS)}")
    return argv


def sbatch_argv(script_path: str) -> list[str]:
    # `--` so that a path starting with "-" is not read as an option.
    return ["sbatch", "--parsable", "--", script_path]


def scancel_argv(job_id: str) -> list[str]:
    return ["scancel", "--", _job_ids([job_id])]


_SIGNAL_NAME = re.compile(r"[A-Z][A-Z0-9]{1,15}")


def scancel_signal_argv(job_id: str, signal: str) -> list[str]:
    """scancel that sends `signal` (USR2, not SIGUSR2) to every process of the job.

    --full: the batch shell and every step's processes, so that a trainer run without
    srun is reached too; the portal's batch shell ignores the stack signal.
    """
    if not _SIGNAL_NAME.fullmatch(signal):
        raise ValueError(f"not a signal name: {signal!r}")
    return ["scancel", f"--signal={signal}", "--full", "--", _job_ids([job_id])]


_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
MAX_DRAIN_REASON = 200


def drain_argv(node: str, reason: str) -> list[str]:
    """scontrol that drains one node: running jobs finish, no new ones start there."""
    if not _NODE_NAME.fullmatch(node):
        raise ValueError(f"not a node name: {node!r}")
    reason = " ".join(reason.split())[:MAX_DRAIN_REASON]  # one line: scontrol's reason field
    if not reason:
        raise ValueError("a drain needs a reason")
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={reason}"]


def nodes_argv() -> list[str]:
    return ["scontrol", "--oneliner", "--details", "show", "node"]


def partitions_argv() -> list[str]:
    return ["scontrol", "--oneliner", "show", "partition"]


def _is_error_line(line: str) -> bool:
    lowered = line.lower()
    return "error:" in lowered or "fatal:" in lowered


def check_result(
    command: str, exit_status: int, stderr: str, *, benign: tuple[str, ...] = ()
) -> None:
    """Raise SlurmError if the command failed, even with exit status 0.

    Failure is a non-zero status, or an `error:`/`fatal:` line on stderr. Lines holding
    one of the `benign` messages are not failures. Other stderr lines (warnings) are
    logged.
    """
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if any(_ACCOUNTING_DISABLED in line for line in lines):
        raise AccountingDisabled(command, "; ".join(lines))
    problems = [line for line in lines if not any(message in line for message in benign)]
    accepted = len(problems) < len(lines)
    errors = [line for line in problems if _is_error_line(line)]
    if exit_status != 0 and not (accepted and not errors):
        errors = problems or [f"exit status {exit_status} and nothing on stderr"]
    if errors:
        message = "; ".join(errors)
        retryable = any(marker.lower() in message.lower() for marker in _TRANSIENT)
        raise SlurmError(command, message, retryable=retryable)
    if problems:
        logger.warning("%s printed on stderr: %s", command, "; ".join(problems))


def parse_sbatch(result: CommandResult, *, command: str = "sbatch") -> str:
    """The job id from `sbatch --parsable` (`id` or `id;cluster`).

    A printed id means slurmctld created the job, so it wins over any stderr text or
    exit status: raising then would make the caller submit the same job twice.
    """
    exit_status, stdout, stderr = result.exit_status, result.text, result.error_text
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    match = _SBATCH_ID.fullmatch(lines[-1]) if lines else None
    if match:
        if stderr.strip() or exit_status != 0:
            logger.warning(
                "%s created job %s but exited %s with: %s",
                command,
                match[1],
                exit_status,
                stderr.strip(),
            )
        return match[1]
    check_result(command, exit_status, stderr)
    raise SlurmError(
        command,
        f"printed no job id (stdout {stdout[:200]!r}, stderr {stderr[:200]!r}); "
        "the job may or may not exist: look it up by name before submitting again",
        retryable=False,
    )


def check_scancel(result: CommandResult, *, command: str = "scancel") -> None:
    """A job already finished or forgotten by Slurm counts as cancelled."""
    check_result(command, result.exit_status, result.error_text, benign=_ALREADY_FINISHED)


def squeue_result(result: CommandResult, *, command: str = "squeue") -> list[SqueueRow]:
    """Check and parse one run of `squeue_argv()`, over SSH or through the agent."""
    # `squeue --jobs=N` with one unknown id exits 1; with several it prints nothing.
    benign = ("Invalid job id specified",)
    check_result(command, result.exit_status, result.error_text, benign=benign)
    return parse_squeue(result.text)


def sacct_result(result: CommandResult, *, command: str = "sacct") -> list[SacctRow]:
    """Check and parse one run of `sacct_argv()`; AccountingDisabled without slurmdbd."""
    check_result(command, result.exit_status, result.error_text)
    return parse_sacct(result.text)
