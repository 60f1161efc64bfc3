"""The Slurm adapter: runs Slurm commands directly over one SSH connection.

SSHError from the gateway passes through unchanged: a lost connection or a timeout
means the command's outcome is unknown, not that Slurm refused it.
"""

import shlex
from datetime import datetime, timedelta

from django.utils import timezone

from clusters.slurm.commands import (
    check_result,
    check_scancel,
    drain_argv,
    nodes_argv,
    parse_sbatch,
    partitions_argv,
    sacct_argv,
    sacct_result,
    sbatch_argv,
    scancel_argv,
    scancel_signal_argv,
    squeue_argv,
    squeue_result,
)
from clusters.slurm.errors import AccountingDisabled
from clusters.slurm.parsers import SacctRow, SqueueRow
from clusters.slurm.scontrol import Node, Partition, parse_nodes, parse_partitions
from clusters.slurm.test_only import TestOnly, asks_command, parse_answers
from clusters.slurm.tools import DEFAULT_TOOLS, SlurmTools
from clusters.ssh import CommandResult, Connection

COMMAND_TIMEOUT = 30.0
FIND_BY_NAME_WINDOW = timedelta(days=7)


class Slurm:
    """Slurm on one cluster, as the SSH account of `connection`."""

    def __init__(
        self,
        connection: Connection,
        *,
        tools: SlurmTools = DEFAULT_TOOLS,
        timeout: float = COMMAND_TIMEOUT,
    ) -> None:
        self.connection = connection
        self.tools = tools
        self.timeout = timeout
        self._accounting: bool | None = None  # unknown until sacct has been tried

    def _run(self, argv: list[str], *, clean: bool = True) -> tuple[str, CommandResult]:
        command = shlex.join(self.tools.wrap(argv, clean=clean))
        return command, self.connection.run(command, timeout=self.timeout)

    def submit(self, script_path: str) -> str:
        """Submit a batch script already on the cluster; returns the job id."""
        # The job inherits the submitting environment: sbatch alone keeps the session's.
        command, result = self._run(sbatch_argv(script_path), clean=False)
        return parse_sbatch(result, command=command)

    def test_starts(self, asks: list[list[str]]) -> list[TestOnly]:
        """When the scheduler would start each ask (scheduling options), in one command."""
        if not asks:
            return []
        result = self.connection.run(asks_command(asks, tools=self.tools), timeout=self.timeout)
        return parse_answers(result.text, asks=len(asks))

    def cancel(self, job_id: str) -> None:
        """Cancel a job; one that has already finished counts as cancelled."""
        command, result = self._run(scancel_argv(job_id))
        check_scancel(result, command=command)

    def signal(self, job_id: str, signal: str) -> None:
        """Send a signal to every process of a running job (needs its owner or an operator)."""
        command, result = self._run(scancel_signal_argv(job_id, signal))
        check_scancel(result, command=command)

    def queue(self, job_ids: list[str]) -> list[SqueueRow]:
        """What squeue knows of these jobs; finished ones vanish after MinJobAge."""
        if not job_ids:
            return []
        command, result = self._run(squeue_argv(job_ids=job_ids))
        return squeue_result(result, command=command)

    def named(self, names: list[str]) -> list[SqueueRow]:
        """squeue's jobs of any user (as far as this account may see) with exactly these names.

        Names with a comma are left out: Slurm splits --name on commas.
        """
        exact = sorted({name for name in names if name and "," not in name})
        if not exact:
            return []
        command, result = self._run(squeue_argv(names=exact))
        return [row for row in squeue_result(result, command=command) if row.name in exact]

    def history(self, job_ids: list[str], *, since: datetime) -> list[SacctRow]:
        """sacct's allocation records of these jobs, whoever ran them (AccountingDisabled)."""
        if not job_ids:
            return []
        command, result = self._run(sacct_argv(job_ids=job_ids, since=since, all_users=True))
        return sacct_result(result, command=command)

    def find_by_name(self, name: str, *, since: datetime | None = None) -> list[SqueueRow]:
        """This account's jobs with exactly this name: squeue, else sacct if it is on."""
        user = self.connection.endpoint.username
        # Slurm splits --name on commas: ask for all the user's jobs and filter here.
        names = None if "," in name else [name]
        command, result = self._run(squeue_argv(names=names, user=user))
        rows = [row for row in squeue_result(result, command=command) if row.name == name]
        if rows or self._accounting is False:
            return rows
        since = since or timezone.now() - FIND_BY_NAME_WINDOW
        command, result = self._run(sacct_argv(names=names, since=since))
        try:
            history = sacct_result(result, command=command)
        except AccountingDisabled:
            self._accounting = False
            return []
        self._accounting = True
        return [row.as_squeue_row() for row in history if row.name == name]

    def partitions(self) -> list[Partition]:
        command, result = self._run(partitions_argv())
        check_result(command, result.exit_status, result.error_text)
        return parse_partitions(result.text)

    def drain(self, node: str, reason: str) -> None:
        """Drain a node (needs a Slurm operator or admin account)."""
        command, result = self._run(drain_argv(node, reason))
        check_result(command, result.exit_status, result.error_text)

    def nodes(self) -> list[Node]:
        command, result = self._run(nodes_argv())
        check_result(command, result.exit_status, result.error_text)
        return parse_nodes(result.text)
