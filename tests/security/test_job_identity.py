"""Which Slurm job is an attempt's, by what its tenant cannot change (issue 33, point 2).

From inside a job its tenant can rename it, lower its time limit and requeue it, and it
can hold a job while it waits; the user it runs as, its id and (until a requeue) its
submit time are Slurm's. squeue_identity.txt and sacct_identity.txt are the portal
account's verbatim view of such jobs (tests/clusters/fixtures/slurm/README.md); each
alice job's comment (which sacct does not keep) names the attempt it stands for.
"""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from clusters.models import Cluster
from clusters.slurm import SqueueRow, parse_sacct, parse_squeue
from clusters.ssh import CommandResult
from jobs.accounting import measured_by_sacct
from jobs.billing import attempt_reserve
from jobs.enums import State
from jobs.identity import CLOCK_SKEW, is_attempts_job, tampering
from jobs.models import Attempt, JobEvent
from jobs.poll import authority
from jobs.poll.authority import ClusterTruth, Verdict, truth_apply, truth_read, verdict
from projects.models import Reservation
from tests import factories
from tests.clusters.slurm_output import fixture

PREFIX = "portal-00000000-0000-4000-8000-0000000033"
SQUEUE_TEXT = fixture("squeue_identity.txt")
SACCT_TEXT = fixture("sacct_identity.txt")
ROWS = parse_squeue(SQUEUE_TEXT)
# By the attempt each alice job stands for: 01 renamed itself, 02 requeued itself, 03
# lowered its time limit, 04 was held while pending, 05 did nothing; bob's is bob's.
JOBS = {row.comment.removeprefix(PREFIX): row for row in ROWS if row.comment}
BOBS = next(row for row in ROWS if row.user == "bob")
RECORDS = parse_sacct(SACCT_TEXT)


def _uuid(key: str) -> uuid.UUID:
    return uuid.UUID(f"{PREFIX.removeprefix('portal-')}{key}")


def _first_start(job_id: str) -> Any:
    return next(r.start_time for r in RECORDS if r.job_id == job_id and r.start_time)


@pytest.fixture
def attempts(project, member, cluster: Cluster) -> dict[str, Attempt]:
    """An attempt per alice job, RUNNING as the portal saw it (its first start), made
    before any of them was submitted."""
    account = factories.account(cluster, None)
    account.username = "alice"
    account.save()
    made = min(r.submit_time for r in RECORDS if r.submit_time) - timedelta(seconds=2)
    found: dict[str, Attempt] = {}
    for key, row in JOBS.items():
        _, attempt = factories.job(project, member, cluster, gpus_per_node=1)
        started = _first_start(row.job_id) if row.state == "RUNNING" else None
        Attempt.objects.filter(pk=attempt.pk).update(
            uuid=_uuid(key),
            account=account,
            created_at=made,
            submitted_at=made,
            state=State.RUNNING if started else State.PENDING,
            state_changed_at=made,
            started_at=started,
            slurm_job_id=row.job_id,
        )
        attempt.refresh_from_db()
        found[key] = attempt
    return found


# --- the capture ---------------------------------------------------------------------------


def test_squeue_and_sacct_give_the_user_and_the_submit_time() -> None:
    assert {row.user for row in ROWS} == {"alice", "bob"}
    assert all(row.submit_time is not None for row in ROWS)
    renamed = JOBS["01"]
    assert (renamed.name, renamed.state) == ("innocent", "RUNNING")
    assert JOBS["03"].time_limit == timedelta(minutes=5)  # lowered from 10 inside
    assert (JOBS["04"].state, JOBS["04"].reason) == ("PENDING", "JobHeldUser")
    # A requeue resets the submit time: after the start of the run it ended.
    requeued = JOBS["02"]
    assert requeued.submit_time > _first_start(requeued.job_id)
    runs = [r for r in RECORDS if r.job_id == requeued.job_id]
    assert [r.state for r in runs] == ["REQUEUED", "CANCELLED"]
    assert {r.user for r in RECORDS} == {"alice", "bob"}


# --- the rule ------------------------------------------------------------------------------


def test_a_job_is_the_attempts_by_its_user_and_submit_time_whatever_its_name(
    attempts: dict[str, Attempt],
) -> None:
    attempt = attempts["01"]
    renamed = JOBS["01"]
    assert is_attempts_job(attempt, user=renamed.user, submitted=renamed.submit_time)
    assert not is_attempts_job(attempt, user=BOBS.user, submitted=BOBS.submit_time)
    assert not is_attempts_job(attempt, user="alice", submitted=None)
    # A job submitted before the attempt was made (an id reused by a cluster started
    # afresh) is another job, whatever it is named.
    before = attempt.created_at - CLOCK_SKEW
    assert is_attempts_job(attempt, user="alice", submitted=before)  # clocks may differ
    assert not is_attempts_job(attempt, user="alice", submitted=before - timedelta(seconds=1))
    earlier = attempt.created_at + timedelta(hours=1)
    Attempt.objects.filter(pk=attempt.pk).update(created_at=earlier)
    attempt.refresh_from_db()
    assert not is_attempts_job(attempt, user=renamed.user, submitted=renamed.submit_time)


def test_renaming_and_requeueing_are_tampering_and_a_shorter_limit_or_a_hold_is_not(
    attempts: dict[str, Attempt],
) -> None:
    def changed(key: str) -> str:
        row = JOBS[key]
        return tampering(attempts[key], name=row.name, submitted=row.submit_time)

    assert changed("01") == "is named 'innocent', not as the portal named it"
    assert changed("02") == "was requeued after it started (submitted with --no-requeue)"
    assert changed("03") == changed("04") == changed("05") == ""


def test_a_requeue_within_the_second_of_the_start_is_told_by_the_job_waiting_again(
    attempts: dict[str, Attempt],
) -> None:
    attempt, row = attempts["02"], JOBS["02"]
    attempt.started_at = row.submit_time  # its submit time no later than the start seen
    assert tampering(attempt, name=row.name, submitted=row.submit_time) == ""
    assert tampering(attempt, name=row.name, submitted=row.submit_time, waiting=True) == (
        "was requeued after it started (submitted with --no-requeue)"
    )
    # A job that never started may wait (held, as 04 is): nothing changed.
    held = JOBS["04"]
    assert tampering(attempts["04"], name=held.name, submitted=held.submit_time, waiting=True) == ""


def test_the_poll_cancels_a_renamed_or_requeued_job_and_keeps_following_it(
    attempts: dict[str, Attempt],
) -> None:
    for key in ("01", "02"):
        row = JOBS[key]
        found = verdict(attempts[key], row, [])
        assert found == Verdict(job_id=row.job_id, cancel={row.job_id: tampering(
            attempts[key], name=row.name, submitted=row.submit_time
        )})  # fmt: skip
    for key in ("03", "04", "05"):
        assert verdict(attempts[key], JOBS[key], []) is None


def test_another_users_job_under_the_id_is_never_cancelled(attempts: dict[str, Attempt]) -> None:
    attempt = attempts["05"]
    attempt.slurm_job_id = BOBS.job_id
    assert verdict(attempt, BOBS, []) == Verdict(job_id=None)
    # Its own job, of its name, is followed instead.
    assert verdict(attempt, BOBS, [JOBS["05"], BOBS]) == Verdict(job_id=JOBS["05"].job_id)


def test_a_forged_id_of_the_users_other_job_follows_the_named_one_and_cancels_the_other(
    attempts: dict[str, Attempt],
) -> None:
    # sbatch's answer (through alice's session) named her job 01 for attempt 05.
    attempt = attempts["05"]
    attempt.slurm_job_id = JOBS["01"].job_id
    found = verdict(attempt, JOBS["01"], [JOBS["05"]])
    assert found is not None and found.job_id == JOBS["05"].job_id
    assert found.cancel == {JOBS["01"].job_id: "is named 'innocent', not as the portal named it"}


def test_a_job_renaming_itself_beside_a_copy_of_its_name_cannot_leave_both_running(
    attempts: dict[str, Attempt],
) -> None:
    # Attempt 01's job renamed itself and a second job took its name: the portal keeps the
    # copy and cancels the renamed original; with two copies, the younger one too.
    attempt, renamed = attempts["01"], JOBS["01"]
    copy = _named_as(JOBS["03"], attempt)
    younger = _named_as(JOBS["05"], attempt)
    found = verdict(attempt, renamed, [copy, younger])
    assert found is not None and found.job_id == copy.job_id
    assert set(found.cancel) == {renamed.job_id, younger.job_id}


def _named_as(row: SqueueRow, attempt: Attempt) -> SqueueRow:
    return replace(row, name=attempt.slurm_job_name)


# --- through the portal account ---------------------------------------------------------


class _Cluster:
    """The portal account's session: the captured output, and the commands it ran."""

    def __init__(self) -> None:
        self.commands: list[str] = []
        self.squeue, self.sacct = SQUEUE_TEXT, SACCT_TEXT

    def run(self, command: str, timeout: float | None = None) -> CommandResult:
        self.commands.append(command)
        if "/squeue " in command:
            return CommandResult(0, self.squeue.encode(), b"")
        if "/sacct " in command:
            return CommandResult(0, self.sacct.encode(), b"")
        return CommandResult(0, b"", b"")  # scancel says nothing


@pytest.fixture
def portal_session(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Cluster]:
    cluster.portal_username = "portal-svc"
    cluster.portal_private_key = "key"
    cluster.accounting_enabled = True
    cluster.save()
    session = _Cluster()
    logins: list[str] = []

    @contextmanager
    def opened(endpoint: Any) -> Iterator[_Cluster]:
        logins.append(endpoint.username)
        yield session

    monkeypatch.setattr(authority.pool, "session", opened)
    yield session
    assert set(logins) <= {"portal-svc"}  # never through the tenant's own login


def test_a_renamed_job_is_cancelled_through_the_portal_account_and_stays_live_and_reserved(
    attempts: dict[str, Attempt], cluster: Cluster, portal_session: _Cluster
) -> None:
    live = list(attempts.values())
    renamed = attempts["01"]
    reservation = attempt_reserve(attempt=renamed)
    truth = truth_read(cluster=Cluster.objects.get(pk=cluster.pk), attempts=live)
    cancels = [c for c in portal_session.commands if "/scancel " in c]
    assert {c.rsplit(" ", 1)[1] for c in cancels} == {JOBS["01"].job_id, JOBS["02"].job_id}

    truth_apply(live, truth, {})
    renamed.refresh_from_db()
    # Still the attempt's job, running, counted against the cap and reserved until Slurm
    # says it ended; the timeline says why it will end.
    assert (renamed.state, renamed.slurm_job_id) == (State.RUNNING, JOBS["01"].job_id)
    assert Reservation.objects.get(pk=reservation.pk).released_at is None
    note = JobEvent.objects.get(attempt=renamed, reason__contains="'innocent'")
    assert "the portal cancelled it through its own account" in note.reason
    assert renamed.cancel_requested_at is not None
    for key in ("03", "04", "05"):
        attempts[key].refresh_from_db()
        assert attempts[key].cancel_requested_at is None
        assert not JobEvent.objects.filter(attempt=attempts[key]).exists()
    truth_apply(live, truth, {})  # the next poll cancels again but says it once
    assert JobEvent.objects.filter(attempt=renamed, reason__contains="'innocent'").count() == 1


def test_a_job_gone_from_squeue_while_sacct_says_it_runs_is_cancelled_and_stays_live(
    attempts: dict[str, Attempt], cluster: Cluster, portal_session: _Cluster
) -> None:
    # squeue (PrivateData, a hidden partition) no longer lists attempt 05's job; sacct,
    # read while it ran, says it still runs.
    plain = attempts["05"]
    portal_session.squeue = fixture("squeue_unknown_ids.txt")  # squeue's empty answer
    portal_session.sacct = fixture("sacct_identity_running.txt")
    truth = truth_read(cluster=Cluster.objects.get(pk=cluster.pk), attempts=[plain])
    (cancel,) = [c for c in portal_session.commands if "/scancel " in c]
    assert cancel.endswith(f" -- {plain.slurm_job_id}")
    assert truth_apply([plain], truth, {}) == 0
    plain.refresh_from_db()
    assert plain.state == State.RUNNING and plain.cancel_requested_at is not None
    note = JobEvent.objects.get(attempt=plain)
    assert "left Slurm's queue while sacct says it still runs" in note.reason


def test_a_poll_sends_at_most_max_cancels_scancels_and_says_the_rest_wait(
    attempts: dict[str, Attempt], cluster: Cluster, portal_session: _Cluster
) -> None:
    # Attempt 01's job renamed itself and alice made many jobs of its name: 68's captured
    # line under other ids (what squeue would print for them), the oldest kept.
    renamed = attempts["01"]
    line = next(x for x in SQUEUE_TEXT.splitlines(keepends=True) if x.startswith("68\x1f"))
    copies = "".join(
        line.replace("68\x1f", f"{100 + n}\x1f", 1).replace(
            f"{PREFIX}05\x1f\n", f"{renamed.slurm_job_name}\x1f\n"
        )
        for n in range(authority.MAX_CANCELS + 5)
    )
    portal_session.squeue = SQUEUE_TEXT + copies
    truth = truth_read(cluster=Cluster.objects.get(pk=cluster.pk), attempts=[renamed])
    cancels = [c for c in portal_session.commands if "/scancel " in c]
    assert len(cancels) == authority.MAX_CANCELS
    decided = truth.verdicts[renamed.slurm_job_id]
    assert decided.job_id == "100" and len(decided.cancel) == authority.MAX_CANCELS + 5
    assert len(truth.refused) == 5 and set(truth.refused.values()) == {"left for the next poll"}


def test_a_renamed_job_ended_in_sacct_ends_the_attempt_as_sacct_says(
    attempts: dict[str, Attempt],
) -> None:
    renamed = attempts["01"]
    record = next(r for r in RECORDS if r.job_id == renamed.slurm_job_id)
    assert record.name == "innocent"
    truth = ClusterTruth(history={record.job_id: record}, accounting=True)
    assert truth_apply([renamed], truth, {}) == 1
    renamed.refresh_from_db()
    assert (renamed.state, renamed.ended_at) == (State.CANCELLED, record.end_time)


def test_sacct_charges_a_renamed_job_its_run_and_a_requeued_one_every_run(
    attempts: dict[str, Attempt], portal_session: _Cluster
) -> None:
    renamed, requeued = attempts["01"], attempts["02"]
    measured = measured_by_sacct(renamed)
    (record,) = [r for r in RECORDS if r.job_id == renamed.slurm_job_id]
    assert measured is not None and record.elapsed is not None
    assert (measured.gpus, measured.ended_at - measured.started_at) == (1, record.elapsed)
    assert "--duplicates" in portal_session.commands[-1]

    runs = [r for r in RECORDS if r.job_id == requeued.slurm_job_id]
    measured = measured_by_sacct(requeued)
    assert measured is not None and measured.gpus == 1
    assert measured.started_at == runs[0].start_time
    assert measured.ended_at - measured.started_at == sum(
        (r.elapsed for r in runs if r.elapsed is not None), timedelta()
    )
