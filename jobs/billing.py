"""An attempt's quota and ledger: its reservation at start, its charge when it ends.

The rules and the ledger writes are projects' (`projects.quota`, `projects.services`);
this module turns an attempt into the plain values they take, and decides what an
attempt used (the portal's own times here, sacct in `jobs.accounting`).
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from jobs.enums import FINAL_STATES, State
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.notifications import queue_job_end_mail
from portal_lib.queueing import queue_on_commit
from projects.models import Reservation, UsageCharge
from projects.quota import QuotaFull, QuotaRefusal, QuotaRequest
from projects.services import (
    Measured,
    Payer,
    ledger_lock,
    reservation_create,
    reservation_end,
    reservation_release,
    usage_charge,
)

CHARGE_FROM_ACCOUNTING = "jobs.tasks.charge_from_accounting"


def quota_request(job: Job) -> QuotaRequest:
    """What the job asks of its project's quota (a saved job or an unsaved one from a spec)."""
    return QuotaRequest(
        project=job.project,
        cluster=job.cluster,
        partition=job.partition,
        gpus=job.total_gpus,
        cpus=job.total_cpus,
        nodes=job.nodes,
        time_limit=job.time_limit,
    )


def _with_job(attempt: Attempt) -> Attempt:
    return Attempt.objects.select_related("job", "job__cluster", "job__project", "job__user").get(
        pk=attempt.pk
    )


class RoomFull(JobError):
    """Only a concurrency limit stops the attempt now: it may wait in its project's line."""

    code = "room_full"


def attempt_reserve(*, attempt: Attempt) -> Reservation:
    """Hold the attempt's GPUs, CPUs and nodes x time limit against its budgets, or refuse.

    Call it inside the transaction that creates the attempt. A refusal is why this job
    cannot start: a JobError naming the limit, the request and what is left; a RoomFull
    when only the concurrency limits are full (the message says why, in plain words).
    """
    attempt = _with_job(attempt)
    try:
        return reservation_create(attempt_id=attempt.pk, request=quota_request(attempt.job))
    except QuotaFull as exc:
        raise RoomFull(exc.message) from exc
    except QuotaRefusal as exc:
        raise JobError(exc.message, errors=exc.errors) from exc


def _payer(attempt: Attempt) -> Payer:
    job = attempt.job
    return Payer(
        attempt_id=attempt.pk,
        project=job.project,
        user_id=job.user_id,
        cluster_id=job.cluster_id,
        price_per_gpu_hour=job.cluster.price_per_gpu_hour,
        price_per_cpu_hour=job.cluster.price_per_cpu_hour,
    )


def attempt_ran(attempt: Attempt) -> bool:
    """Whether the portal saw the attempt get an allocation (a pending cancel did not).

    A job that started and ended between two polls has no start time but left its exit
    status; a cancelled one without a start time is taken as never started.
    """
    if attempt.started_at is not None:
        return True
    return (
        bool(attempt.slurm_job_id)
        and attempt.exit_code is not None
        and attempt.state != State.CANCELLED
    )


def measured_by_portal(attempt: Attempt) -> Measured | None:
    if not attempt_ran(attempt):
        return None
    ended = attempt.ended_at or attempt.state_changed_at
    # A job that started and ended between two polls has no start time of its own:
    # charge from its submission, an upper bound.
    started = attempt.started_at or attempt.submitted_at or ended
    return Measured(
        gpus=attempt.job.total_gpus,
        cpus=attempt.job.total_cpus,
        nodes=attempt.job.nodes,
        started_at=min(started, ended),
        ended_at=ended,
        source=UsageCharge.Source.PORTAL,
    )


def attempt_settle(*, attempt: Attempt) -> None:
    """The attempt has ended: free its GPUs and charge what it used (idempotent).

    With Slurm accounting the charge waits for sacct (a task); its hours stay reserved
    until then, so the budget is never overspent in between.
    """
    with transaction.atomic():
        attempt = _with_job(attempt)
        if not ledger_lock(project_id=attempt.job.project_id, attempt_id=attempt.pk):
            return
        queue_job_end_mail(attempt)
        # With accounting, sacct says whether and how long it ran (a cancel that
        # raced the start included).
        if attempt.job.cluster.accounting_enabled and attempt.slurm_job_id:
            reservation_end(attempt_id=attempt.pk)
            queue_on_commit(CHARGE_FROM_ACCOUNTING, attempt.pk)
            return
        measured = measured_by_portal(attempt)
        if measured is None:
            reservation_release(attempt_id=attempt.pk)
        else:
            usage_charge(payer=_payer(attempt), measured=measured)


def attempt_charge(
    *, attempt: Attempt, measured: Measured | None, never_ran: bool = False
) -> UsageCharge | None:
    """Write the attempt's ledger entry (once) and release its reservation.

    `measured` None: charge the portal's own times, unless `never_ran` (sacct says the
    job never started), which only releases the reservation.
    """
    with transaction.atomic():
        attempt = _with_job(attempt)
        ledger_lock(project_id=attempt.job.project_id, attempt_id=attempt.pk)
        if measured is None and not never_ran:
            measured = measured_by_portal(attempt)
        if measured is None:
            reservation_release(attempt_id=attempt.pk)
            return None
        return usage_charge(payer=_payer(attempt), measured=measured)


def charges_reconcile(*, older_than: timedelta = timedelta(minutes=10)) -> int:
    """Settle attempts that ended but still hold a reservation (a lost charge task)."""
    cutoff = timezone.now() - older_than
    stuck = Attempt.objects.filter(
        state__in=FINAL_STATES,
        reservation__released_at__isnull=True,
        state_changed_at__lt=cutoff,
    )
    count = 0
    for attempt in stuck:
        attempt_charge(attempt=attempt, measured=None)
        count += 1
    return count
