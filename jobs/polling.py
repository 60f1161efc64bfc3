"""One poll of a cluster: one agent call per cluster account, whatever the number of jobs."""

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from django.utils import timezone

from clusters.agent import (
    AgentCommand,
    AgentReply,
    AgentRequest,
    FileRead,
    ListingRead,
    run_agent,
)
from clusters.models import ClusterAccount
from clusters.selectors import account_endpoint
from clusters.slurm import SlurmError, SqueueRow, squeue_argv, squeue_result
from clusters.ssh import CommandResult, SSHError, pool
from jobs.models import FINAL_STATES, Attempt, State
from jobs.rundir import EXIT_CODE_FILE, RunDir, file_key
from jobs.selectors import live_attempts
from jobs.slurm_states import portal_state
from jobs.states import attempt_transition

logger = logging.getLogger(__name__)

# A job gone from squeue without an exit file may be mid-requeue; wait this long.
VANISH_GRACE = timedelta(seconds=30)


class FileWatcher(Protocol):
    """Reads files of the polled attempts in the same agent call (monitoring registers one)."""

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]: ...

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        """Store what the reply brought; returns the attempts with bytes still unread."""
        ...


FILE_WATCHERS: list[FileWatcher] = []


@dataclass
class PollResult:
    attempts: int = 0
    changed: int = 0
    unreachable: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # accounts whose poll raised


def cluster_poll(*, cluster_id: int) -> PollResult:
    result = PollResult()
    by_account: dict[int, list[Attempt]] = defaultdict(list)
    accounts: dict[int, ClusterAccount] = {}
    for attempt in live_attempts(cluster_id=cluster_id):
        if attempt.account is None:
            continue
        by_account[attempt.account.pk].append(attempt)
        accounts[attempt.account.pk] = attempt.account
    for account_id, attempts in by_account.items():
        result.attempts += len(attempts)
        account = accounts[account_id]
        try:
            result.changed += _poll_account(account, attempts, result)
        except Exception:  # one account's failure must not cost the accounts after it
            logger.exception("poll of account %s on cluster %s failed", account.pk, cluster_id)
            result.failed.append(account.username)
    return result


def _poll_account(account: ClusterAccount, attempts: list[Attempt], result: PollResult) -> int:
    try:
        reply = _ask(account, attempts)
    except SSHError as exc:
        result.unreachable.append(account.username)
        return _mark_unknown(attempts, str(exc))
    live = [a for a in attempts if not a.is_finished]
    changed = _apply(live, reply)
    # Each watcher keeps its own transactions short: what it parses is the job's
    # output, and no lock is held while it does.
    unread: set[int] = set()
    for watcher in FILE_WATCHERS:
        unread |= watcher.ingest(attempts, reply)
    # Read to the end after they finished: these are never polled again.
    done = [a.pk for a in attempts if a.is_finished and a.pk not in unread]
    if done:
        Attempt.objects.filter(pk__in=done).update(files_complete=True)
    return changed


def _exit_key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, EXIT_CODE_FILE)


def _ask(account: ClusterAccount, attempts: list[Attempt]) -> AgentReply:
    endpoint = account_endpoint(account=account)
    files: list[FileRead] = []
    listings: list[ListingRead] = []
    for watcher in FILE_WATCHERS:
        more_files, more_listings = watcher.requests(attempts)
        files += more_files
        listings += more_listings
    request = AgentRequest(
        # All of the account's jobs rather than --jobs: squeue refuses a list whose
        # jobs have all aged out, and one listing costs the same.
        commands=[AgentCommand(id="squeue", argv=squeue_argv(user=account.username))],
        files=[
            *(
                FileRead(key=_exit_key(a), path=RunDir(a.run_dir).file(EXIT_CODE_FILE))
                for a in attempts
                if a.run_dir and not a.is_finished
            ),
            *files,
        ],
        listings=listings,
    )
    with pool.session(endpoint) as connection:
        return run_agent(connection, request)


def _mark_unknown(attempts: list[Attempt], why: str) -> int:
    changed = 0
    for attempt in attempts:
        if attempt.state != State.UNKNOWN:
            changed += attempt_transition(
                attempt=attempt, to=State.UNKNOWN, reason=f"Cannot reach the cluster: {why}"
            )
    return changed


def _exit_code(reply: AgentReply, attempt: Attempt) -> int | None:
    chunk = reply.files.get(_exit_key(attempt))
    if chunk is None or chunk.error or not chunk.data.strip():
        return None
    try:
        return int(chunk.data.strip().splitlines()[0])
    except ValueError:
        return None


def _apply(attempts: list[Attempt], reply: AgentReply) -> int:
    squeue = reply.commands["squeue"]
    try:
        rows = {
            row.job_id: row
            for row in squeue_result(
                CommandResult(squeue.exit, squeue.stdout.encode(), squeue.stderr.encode())
            )
        }
    except SlurmError as exc:
        # squeue itself failed (slurmctld down): states are unknown, not changed.
        return _mark_unknown(attempts, str(exc))
    now = timezone.now()
    changed = 0
    for attempt in attempts:
        exit_code = _exit_code(reply, attempt)
        row = rows.get(attempt.slurm_job_id)
        if row is not None:
            changed += _from_squeue(attempt, row, exit_code, now)
        elif exit_code is not None:
            changed += attempt_transition(
                attempt=attempt,
                to=State.COMPLETED if exit_code == 0 else State.FAILED,
                reason=f"Exited with status {exit_code}.",
                exit_code=exit_code,
                ended_at=attempt.ended_at or now,
            )
        elif now - attempt.state_changed_at > VANISH_GRACE:
            changed += attempt_transition(
                attempt=attempt,
                to=State.FAILED,
                reason="The job left Slurm's queue without recording an exit status "
                "(killed before the batch script ended, and the cluster keeps no accounting).",
                ended_at=now,
            )
    return changed


def _from_squeue(attempt: Attempt, row: SqueueRow, exit_code: int | None, now: datetime) -> int:
    new = portal_state(row.state)
    fields: dict[str, Any] = {}
    if row.node_list and row.node_list != attempt.node_list and not row.node_list.startswith("("):
        fields["node_list"] = row.node_list
    if row.start_time and new != State.PENDING and attempt.started_at != row.start_time:
        fields["started_at"] = row.start_time
    if new in FINAL_STATES:
        fields["ended_at"] = row.end_time or now
        code = exit_code if exit_code is not None else row.exit_code
        if code is not None:
            fields["exit_code"] = code
    if new == attempt.state and not fields:
        return 0
    reason = row.reason if row.reason and row.reason not in ("None", "(null)") else ""
    return int(
        attempt_transition(
            attempt=attempt, to=new, reason=reason or f"Slurm says {row.state}.", **fields
        )
    )
