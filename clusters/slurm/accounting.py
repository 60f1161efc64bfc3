"""Slurm accounting reads (sacct) for charging, and sacctmgr commands for the quota mirror."""

import shlex
from dataclasses import dataclass
from datetime import datetime

from clusters.slurm.commands import check_result, sacct_argv, sacct_result
from clusters.slurm.parsers import SacctRow
from clusters.slurm.tools import DEFAULT_TOOLS, SlurmTools
from clusters.ssh import Connection

COMMAND_TIMEOUT = 30.0


def job_accounting(
    connection: Connection,
    *,
    job_id: str,
    since: datetime,
    tools: SlurmTools = DEFAULT_TOOLS,
) -> list[SacctRow]:
    """sacct's records of one job id since `since`, oldest first: each run of a requeued
    job is a record of its own (--duplicates), as is a job of a reused id.

    Which of them are the attempt's is the caller's rule (`jobs.identity`); none
    while slurmdbd has not got the job yet. Raises AccountingDisabled when the cluster
    keeps no accounting.
    """
    argv = tools.wrap(sacct_argv(job_ids=[job_id], since=since, all_users=True, duplicates=True))
    command = shlex.join(argv)
    rows = sacct_result(connection.run(command, timeout=COMMAND_TIMEOUT), command=command)
    return [row for row in rows if row.job_id == job_id]


@dataclass(frozen=True)
class AccountLimits:
    """An account's limits in Slurm's terms; None clears one (sacctmgr's -1)."""

    gpu_minutes: int | None = None  # GrpTRESMins gres/gpu
    cpu_minutes: int | None = None  # GrpTRESMins cpu
    node_minutes: int | None = None  # GrpTRESMins node
    running_gpus: int | None = None  # GrpTRES gres/gpu: GPUs of running jobs
    submitted_jobs: int | None = None  # GrpSubmitJobs: pending and running jobs


def _limit(value: int | None) -> int:
    return -1 if value is None else value


def account_limits_argv(*, account: str, limits: AccountLimits) -> list[str]:
    """sacctmgr setting every limit the portal mirrors on the account, cleared ones too."""
    minutes = (
        f"cpu={_limit(limits.cpu_minutes)},node={_limit(limits.node_minutes)},"
        f"gres/gpu={_limit(limits.gpu_minutes)}"
    )
    return [
        "sacctmgr",
        "--immediate",
        "modify",
        "account",
        "where",
        f"name={account}",
        "set",
        f"GrpTRESMins={minutes}",
        f"GrpTRES=gres/gpu={_limit(limits.running_gpus)}",
        f"GrpSubmitJobs={_limit(limits.submitted_jobs)}",
    ]


def account_add_argv(*, account: str, description: str) -> list[str]:
    """sacctmgr creating the account (fails harmlessly when it already exists)."""
    return [
        "sacctmgr",
        "--immediate",
        "add",
        "account",
        account,
        f"Description={description or account}",
    ]


_UNCHANGED = ("Nothing new added", "already exists", "Nothing modified")


def run_sacctmgr(
    connection: Connection, argv: list[str], *, tools: SlurmTools = DEFAULT_TOOLS
) -> str:
    """Run one sacctmgr command; 'Nothing new added' / 'Nothing modified' are not errors.

    sacctmgr says those on stdout and exits 1.
    """
    command = shlex.join(tools.wrap(argv))
    result = connection.run(command, timeout=COMMAND_TIMEOUT)
    if result.exit_status == 1 and any(text in result.text for text in _UNCHANGED):
        return result.text
    # sacctmgr prints some refusals ("Unknown option") on stdout only.
    check_result(command, result.exit_status, result.error_text or result.text)
    return result.text
