"""One poll of a cluster: its state and its files, each one agent call per cluster account
whatever the number of jobs.

With a portal account (`Cluster.portal_username`), state comes from its squeue and
sacct (`jobs.poll.authority`) and the users' agent calls bring only their files. Without
one, the old way: each user's own squeue decides, which their jobs can tamper with
(the cluster's pages warn). State and files are read apart (`PARTS`): a controller
that does not answer leaves the logs flowing. The accounts' calls run in parallel, each
within its own budget (`jobs.poll.accounts`): one tenant's slow or noisy login shell
holds up no one else's logs.
"""

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.utils import timezone

from clusters.agent import (
    AgentCommand,
    AgentReply,
    AgentRequest,
    FileRead,
    ListingRead,
    run_agent,
)
from clusters.certificates.logins import login_checks
from clusters.models import ClusterAccount
from clusters.selectors import account_endpoint
from clusters.slurm import SlurmError, squeue_argv, squeue_result
from clusters.ssh import CommandResult, Endpoint, OutputCapExceeded, SSHError, pool
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.accounts import AccountRead, ReadOutcome, accounts_roster, read_accounts
from jobs.poll.authority import (
    VANISH_GRACE,
    from_squeue,
    needs_exit_hint,
    truth_apply,
    truth_read,
)
from jobs.poll.open_pages import jobs_watched
from jobs.poll.pipeline import FileWatcher, poll_pipeline
from jobs.poll.push import push_deltas
from jobs.queue.start_estimates import estimates_due, record_estimates
from jobs.rundir import EXIT_CODE_FILE, RunDir, file_key
from jobs.selectors import live_attempts
from jobs.states import attempt_transition

logger = logging.getLogger(__name__)


# A poll of more attempts than this reads them a slice at a time, and before each slice
# after the first the jobs that have a page open: a researcher watching a job sees its
# lines within a slice's time, not within a whole poll of a thousand jobs (bench/soak.py).
FILES_SLICE = 200


@dataclass
class PollResult:
    attempts: int = 0
    changed: int = 0
    unreachable: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # accounts whose poll raised
    delayed: list[str] = field(default_factory=list)  # accounts left out (jobs.poll.backoff)
    capped: list[str] = field(default_factory=list)  # accounts whose reply was cut at its cap


# A poll has two parts, each its own task and lease (jobs.tasks), so that a controller
# that does not answer (squeue waits out its timeout) never holds up the reading of logs
# and metrics, which needs only the nodes' files.
STATE, FILES = "state", "files"
PARTS = (STATE, FILES)


def cluster_poll(*, cluster_id: int, parts: tuple[str, ...] = PARTS) -> PollResult:
    """Poll the cluster's attempts: their state (Slurm), their files (logs, metrics), or both."""
    result = PollResult()
    attempts = live_attempts(cluster_id=cluster_id)
    if not attempts:
        return result
    if STATE in parts:
        _poll_state(attempts, result)
    if FILES in parts:
        _poll_files(attempts, result)
    return result


def _by_account(attempts: list[Attempt]) -> list[tuple[ClusterAccount, list[Attempt]]]:
    accounts: dict[int, ClusterAccount] = {}
    groups: dict[int, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        if attempt.account is not None:
            accounts[attempt.account.pk] = attempt.account
            groups[attempt.account.pk].append(attempt)
    return [(accounts[pk], group) for pk, group in groups.items()]


def _each_account(
    attempts: list[Attempt],
    result: PollResult,
    request: Callable[[ClusterAccount, list[Attempt]], AgentRequest],
    handle: Callable[[ReadOutcome], int],
) -> None:
    """Each account's agent call with `request`, in parallel; `handle` takes each outcome in
    this thread as it comes (the accounts left out for a while are counted, not read)."""
    roster = accounts_roster(_by_account(attempts), _ask)
    # A sliced poll meets a left-out account once a slice: counted once.
    result.delayed += [a.username for a, _ in roster.left_out if a.username not in result.delayed]
    reads = []
    # Whether each account may still be used (its user active), and the signing CA: read
    # once for the poll, not once per account.
    checks = login_checks(accounts=[account for account, _ in roster.due])
    for account, group in roster.due:
        try:
            endpoint = account_endpoint(account=account, checks=checks)
            reads.append(AccountRead(account, group, endpoint, request(account, group)))
        except Exception:  # one account's failure must not cost the others
            _failed(account, result)
    for outcome in read_accounts(reads, _ask, noted=roster.noted):
        account = outcome.read.account
        if isinstance(outcome.error, OutputCapExceeded):
            result.capped.append(account.username)
        try:
            result.changed += handle(outcome)
        except Exception:
            _failed(account, result)


def _failed(account: ClusterAccount, result: PollResult) -> None:
    logger.exception("poll of account %s on cluster %s failed", account.pk, account.cluster_id)
    result.failed.append(account.username)


def _reply(outcome: ReadOutcome) -> AgentReply:
    """The outcome's reply; what the call raised, raised here."""
    if outcome.error is not None:
        raise outcome.error
    assert outcome.reply is not None  # noqa: S101 - a call gives a reply or an error
    return outcome.reply


def _poll_state(attempts: list[Attempt], result: PollResult) -> None:
    """The portal account's squeue and sacct decide; without one, each user's squeue."""
    live = [a for a in attempts if not a.is_finished]
    if not live:
        return
    result.attempts = len(live)
    before = {a.pk: a.state for a in live}
    try:
        _read_state(live, result)
    finally:  # an open page hears of a new state at once, new bytes or not
        _push_states([a for a in live if a.state != before[a.pk]])


def _read_state(live: list[Attempt], result: PollResult) -> None:
    cluster = live[0].job.cluster
    if not cluster.has_portal_account:
        _each_account(
            live,
            result,
            lambda account, group: _request(account, group, squeue=True, exit_files=True),
            lambda outcome: _user_state(outcome, result),
        )
        return
    try:
        truth = truth_read(cluster=cluster, attempts=live)
    except (SSHError, SlurmError) as exc:
        result.unreachable.append(cluster.portal_username)
        result.changed += _mark_unknown(live, str(exc))
        return
    if truth.queue and estimates_due(cluster_id=cluster.pk):
        record_estimates(live, truth.queue)
    hints: dict[int, int | None] = {}

    def hint(outcome: ReadOutcome) -> int:
        account, group = outcome.read.account, outcome.read.attempts
        try:
            reply = _reply(outcome)
        except SSHError as exc:
            result.unreachable.append(account.username)
            logger.info("exit-code files of %s unread: %s", account.username, exc)
            return 0
        hints.update({a.pk: _exit_code(reply, a) for a in group})
        return 0

    # Only for a cluster without accounting.
    _each_account(
        needs_exit_hint(live, truth),
        result,
        lambda account, group: _request(account, group, squeue=False, exit_files=True),
        hint,
    )
    result.changed += truth_apply(live, truth, hints)


def _push_states(attempts: list[Attempt]) -> None:
    push_deltas(
        [
            {"type": "job.delta", "job": a.job_id, "attempt": a.number, "state": a.state}
            for a in attempts
        ]
    )


def _user_state(outcome: ReadOutcome, result: PollResult) -> int:
    attempts = outcome.read.attempts
    try:
        reply = _reply(outcome)
    except SSHError as exc:
        result.unreachable.append(outcome.read.account.username)
        return _mark_unknown(attempts, str(exc))
    return _apply(attempts, reply)


def _poll_files(attempts: list[Attempt], result: PollResult) -> None:
    """Each account's logs and metrics, the live attempts' and the ended ones not yet read.

    A long poll goes a slice at a time, the jobs with a page open first, and reads those
    again before each later slice (the pipeline's page watchers only).
    """
    result.attempts = max(result.attempts, len(attempts))
    pipeline = poll_pipeline()
    if not pipeline.watchers:
        return
    watched: list[Attempt] = []
    if len(attempts) > FILES_SLICE and pipeline.page_watchers:
        open_pages = jobs_watched() or set()  # unknown: no page gets more than the others
        watched = [a for a in attempts if a.job_id in open_pages and not a.is_finished]
        first = {a.pk for a in watched}
        attempts = watched + [a for a in attempts if a.pk not in first]
    for start in range(0, len(attempts), FILES_SLICE):
        if start and watched:
            _read_files(watched, result, pipeline.page_watchers, whole=False)
        _read_files(attempts[start : start + FILES_SLICE], result, pipeline.watchers, whole=True)


def _read_files(
    attempts: list[Attempt], result: PollResult, watchers: Sequence[FileWatcher], *, whole: bool
) -> None:
    _each_account(
        attempts,
        result,
        lambda account, group: _request(
            account, group, squeue=False, exit_files=False, watchers=watchers
        ),
        lambda outcome: _files(outcome, result, watchers, whole=whole),
    )


def _files(
    outcome: ReadOutcome, result: PollResult, watchers: Sequence[FileWatcher], *, whole: bool
) -> int:
    """Take in an account's files for these watchers; `whole`: every watcher, once a poll,
    so a finished attempt read to its end is marked complete."""
    account, attempts = outcome.read.account, outcome.read.attempts
    try:
        reply = _reply(outcome)
    except SSHError as exc:  # a user's own login failing says nothing of the state
        result.unreachable.append(account.username)
        logger.info("files of %s unread: %s", account.username, exc)
        return 0
    # Each watcher keeps its own transactions short: what it parses is the job's
    # output, and no lock is held while it does.
    unread: set[int] = set()
    for watcher in watchers:
        unread |= watcher.ingest(attempts, reply)
    if not whole:
        return 0
    # Read to the end after they finished: these are never polled again. (Finished as
    # loaded before the read: what ended later is read once more by the next poll.)
    done = [a.pk for a in attempts if a.is_finished and a.pk not in unread]
    if done:
        Attempt.objects.filter(pk__in=done).update(files_complete=True)
    return 0


def _exit_key(attempt: Attempt) -> str:
    return file_key(attempt.uuid, EXIT_CODE_FILE)


def _request(
    account: ClusterAccount,
    attempts: list[Attempt],
    *,
    squeue: bool,
    exit_files: bool,
    watchers: Sequence[FileWatcher] | None = None,
) -> AgentRequest:
    files: list[FileRead] = []
    listings: list[ListingRead] = []
    for watcher in watchers or []:
        more_files, more_listings = watcher.requests(attempts)
        files += more_files
        listings += more_listings
    if exit_files:
        files += [
            FileRead(key=_exit_key(a), path=RunDir(a.run_dir).file(EXIT_CODE_FILE))
            for a in attempts
            if a.run_dir and not a.is_finished
        ]
    # Without a portal account, the user's own squeue (tamperable): all of the account's
    # jobs rather than --jobs, since squeue refuses a list whose jobs have all aged out.
    argv = account.cluster.slurm_tools.wrap(squeue_argv(user=account.username))
    return AgentRequest(
        commands=[AgentCommand(id="squeue", argv=argv)] if squeue else [],
        files=files,
        listings=listings,
    )


def _ask(endpoint: Endpoint, request: AgentRequest, budget: float) -> AgentReply:
    """One account's agent call (in a thread of `jobs.poll.accounts`: no database here)."""
    with pool.session(endpoint) as connection:
        return run_agent(connection, request, timeout=budget)


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
            changed += from_squeue(attempt, row, exit_code, now)
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
