"""Writes on projects: quota edits, reservations at submit, charges when attempts end."""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from jobs.errors import JobError
from projects.estimate import budget_refusal, concurrency_refusal, fmt_hours, gpu_hours_for
from projects.models import (
    BudgetAlert,
    Membership,
    NotificationPreference,
    Project,
    Quota,
    Reservation,
    UsageCharge,
)
from projects.periods import period_bounds
from projects.selectors import held_gpus, reserved_gpu_hours, usage_from, used_gpu_hours

if TYPE_CHECKING:
    from jobs.models import Attempt

logger = logging.getLogger(__name__)

DEFAULT_ALERT_THRESHOLDS = (80, 100)
JOB_END_MAIL_DELAY = 15  # seconds


@transaction.atomic
def demo_data_create(*, password: str) -> Project:
    """An admin, two researchers and a project with a quota; safe to run again."""
    people: dict[str, User] = {}
    for username, is_admin in (("admin", True), ("alice", False), ("bob", False)):
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = is_admin
        user.email = f"{username}@example.org"
        user.set_password(password)
        user.save()
        people[username] = user
    project, _ = Project.objects.get_or_create(
        slug="vision",
        defaults={"name": "Vision models", "slurm_account": "vision"},
    )
    Quota.objects.get_or_create(
        project=project,
        defaults={
            "gpu_hours_per_period": Decimal("500.00"),
            "max_concurrent_gpus": 4,
            "max_gpus_per_job": 4,
            "max_wall_time": timedelta(hours=24),
        },
    )
    for username, role in (("alice", Membership.Role.OWNER), ("bob", Membership.Role.MEMBER)):
        Membership.objects.update_or_create(
            user=people[username], project=project, defaults={"role": role}
        )
    return project


# --- reservations -----------------------------------------------------------------


def _attempt_with_job(attempt: "Attempt") -> "Attempt":
    from jobs.models import Attempt

    return Attempt.objects.select_related("job", "job__cluster", "job__project", "job__user").get(
        pk=attempt.pk
    )


def attempt_reserve(*, attempt: "Attempt") -> Reservation:
    """Hold the attempt's GPUs x time limit against its project's budget, or refuse.

    Takes the project's quota row lock, so concurrent submissions are checked one after
    the other; call it inside the transaction that creates the attempt. Refusals raise
    JobError naming the limit, the request and what is left.
    """
    with transaction.atomic():
        attempt = _attempt_with_job(attempt)
        job = attempt.job
        project = job.project
        quota = Quota.objects.select_for_update().filter(project=project).first()
        existing = Reservation.objects.filter(attempt=attempt).first()
        if existing is not None:
            return existing
        gpus = job.total_gpus
        spec_hours = gpu_hours_for(gpus=gpus, time_limit=job.time_limit)
        if quota is None:
            raise JobError(
                f"Project {project.slug} has no GPU-hour budget yet: ask an admin to set its quota."
            )
        _check_scope(quota=quota, project=project, job=job)
        if quota.max_gpus_per_job is not None and gpus > quota.max_gpus_per_job:
            raise JobError(
                f"needs {gpus} GPUs; project {project.slug} allows at most "
                f"{quota.max_gpus_per_job} per job",
                errors={"gpus_per_node": [f"Ask for at most {quota.max_gpus_per_job} GPUs."]},
            )
        if job.time_limit > quota.max_wall_time:
            hours = quota.max_wall_time.total_seconds() / 3600
            raise JobError(
                f"Project {project.slug} allows at most {hours:g} h per job; shorten the "
                "time limit.",
                errors={"time_limit": [f"Ask for at most {hours:g} h."]},
            )
        if quota.max_concurrent_gpus is not None:
            held = held_gpus(project_id=project.pk)
            if held + gpus > quota.max_concurrent_gpus:
                raise JobError(
                    concurrency_refusal(
                        project=project, gpus=gpus, held=held, limit=quota.max_concurrent_gpus
                    )
                )
        start, end = period_bounds(quota.period)
        usage = usage_from(
            quota,
            used_gpu_hours(project_id=project.pk, start=start, end=end),
            reserved_gpu_hours(project_id=project.pk),
            None,
        )
        if spec_hours > usage.left_gpu_hours:
            raise JobError(budget_refusal(project=project, needed=spec_hours, usage=usage))
        return Reservation.objects.create(
            attempt=attempt,
            project=project,
            gpus=gpus,
            gpu_hours=spec_hours,
            created_at=timezone.now(),
        )


def _check_scope(*, quota: Quota, project: Project, job: object) -> None:
    cluster = job.cluster  # type: ignore[attr-defined]
    allowed = list(quota.allowed_clusters.values_list("pk", "name"))
    if allowed and cluster.pk not in {pk for pk, _ in allowed}:
        names = ", ".join(sorted(name for _, name in allowed))
        raise JobError(
            f"Project {project.slug} may not use cluster {cluster.name}; choose one of: {names}.",
            errors={"cluster": [f"Choose one of: {names}."]},
        )
    partitions = quota.partition_names()
    partition = job.partition or cluster.default_partition  # type: ignore[attr-defined]
    if partitions and partition not in partitions:
        wanted = f"partition {partition}" if partition else "the default partition"
        raise JobError(
            f"Project {project.slug} may not use {wanted}; choose one of: {', '.join(partitions)}.",
            errors={"partition": [f"Choose one of: {', '.join(partitions)}."]},
        )


# --- charges --------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What an attempt really used, and who says so."""

    gpus: int
    started_at: datetime
    ended_at: datetime
    source: str


def attempt_ran(attempt: "Attempt") -> bool:
    """Whether the portal saw the attempt get an allocation (a pending cancel did not).

    A job that started and ended between two polls has no start time but left its exit
    status; a cancelled one without a start time is taken as never started.
    """
    from jobs.models import State

    if attempt.started_at is not None:
        return True
    return (
        bool(attempt.slurm_job_id)
        and attempt.exit_code is not None
        and attempt.state != State.CANCELLED
    )


def measured_by_portal(attempt: "Attempt") -> Measured | None:
    if not attempt_ran(attempt):
        return None
    ended = attempt.ended_at or attempt.state_changed_at
    # A job that started and ended between two polls has no start time of its own:
    # charge from its submission, an upper bound.
    started = attempt.started_at or attempt.submitted_at or ended
    return Measured(
        gpus=attempt.job.total_gpus,
        started_at=min(started, ended),
        ended_at=ended,
        source=UsageCharge.Source.PORTAL,
    )


def attempt_settle(*, attempt: "Attempt") -> None:
    """The attempt has ended: free its GPUs and charge what it used (idempotent).

    With Slurm accounting the charge waits for sacct (a task); its hours stay reserved
    until then, so the budget is never overspent in between.
    """
    with transaction.atomic():
        attempt = _attempt_with_job(attempt)
        Quota.objects.select_for_update().filter(project_id=attempt.job.project_id).first()
        reservation = Reservation.objects.select_for_update().filter(attempt=attempt).first()
        if reservation is not None and reservation.released_at is not None:
            return
        if UsageCharge.objects.filter(attempt=attempt).exists():
            return
        now = timezone.now()
        _queue_job_end_mail(attempt)
        # With accounting, sacct says whether and how long it ran (a cancel that
        # raced the start included).
        if attempt.job.cluster.accounting_enabled and attempt.slurm_job_id:
            if reservation is not None and reservation.ended_at is None:
                Reservation.objects.filter(pk=reservation.pk).update(ended_at=now)
            attempt_id = attempt.pk
            from projects.tasks import charge_from_accounting

            transaction.on_commit(lambda: charge_from_accounting.delay(attempt_id))
            return
        measured = measured_by_portal(attempt)
        if measured is None:
            _release(attempt)
        else:
            _charge(attempt, measured)


def attempt_charge(
    *, attempt: "Attempt", measured: Measured | None, never_ran: bool = False
) -> UsageCharge | None:
    """Write the attempt's ledger entry (once) and release its reservation.

    `measured` None: charge the portal's own times, unless `never_ran` (sacct says the
    job never started), which only releases the reservation.
    """
    with transaction.atomic():
        attempt = _attempt_with_job(attempt)
        Quota.objects.select_for_update().filter(project_id=attempt.job.project_id).first()
        Reservation.objects.select_for_update().filter(attempt=attempt).first()
        if measured is None and not never_ran:
            measured = measured_by_portal(attempt)
        if measured is None:
            _release(attempt)
            return None
        return _charge(attempt, measured)


def _release(attempt: "Attempt") -> None:
    now = timezone.now()
    Reservation.objects.filter(attempt=attempt, released_at__isnull=True).update(released_at=now)
    Reservation.objects.filter(attempt=attempt, ended_at__isnull=True).update(ended_at=now)


def _charge(attempt: "Attempt", measured: Measured) -> UsageCharge:
    """Under the quota lock: the ledger entry, the release, the budget alerts."""
    job = attempt.job
    seconds = max(int((measured.ended_at - measured.started_at).total_seconds()), 0)
    gpu_hours = (Decimal(measured.gpus * seconds) / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    charge, created = UsageCharge.objects.get_or_create(
        attempt=attempt,
        defaults={
            "project_id": job.project_id,
            "user_id": job.user_id,
            "cluster_id": job.cluster_id,
            "gpus": measured.gpus,
            "started_at": measured.started_at,
            "ended_at": measured.ended_at,
            "elapsed_seconds": seconds,
            "gpu_hours": gpu_hours,
            "cost": (gpu_hours * job.cluster.price_per_gpu_hour).quantize(
                Decimal("0.0001"), ROUND_HALF_UP
            ),
            "source": measured.source,
        },
    )
    _release(attempt)
    if created:
        logger.info(
            "charged %s GPU-h (%s) to %s for attempt %s",
            fmt_hours(gpu_hours),
            measured.source,
            job.project.slug,
            attempt.pk,
        )
        _budget_alerts(job.project, at=measured.ended_at)
    return charge


def _budget_alerts(project: Project, *, at: datetime) -> None:
    """Once per period and threshold: record the alert and mail the owners after commit."""
    quota = Quota.objects.filter(project=project).first()
    if quota is None or quota.gpu_hours_per_period <= 0:
        return
    start, end = period_bounds(quota.period, at)
    used = used_gpu_hours(project_id=project.pk, start=start, end=end)
    thresholds = getattr(settings, "QUOTA_ALERT_THRESHOLDS", DEFAULT_ALERT_THRESHOLDS)
    for threshold in sorted(thresholds):
        if used * 100 < quota.gpu_hours_per_period * threshold:
            break
        alert, created = BudgetAlert.objects.get_or_create(
            project=project,
            period_start=start,
            threshold=threshold,
            defaults={"used_gpu_hours": used, "sent_at": timezone.now()},
        )
        if created:
            alert_id = alert.pk
            from projects.tasks import send_budget_alert

            transaction.on_commit(lambda alert_id=alert_id: send_budget_alert.delay(alert_id))  # type: ignore[misc]


def _queue_job_end_mail(attempt: "Attempt") -> None:
    wants = NotificationPreference.objects.filter(
        user_id=attempt.job.user_id, mail_on_job_end=True
    ).exists()
    if wants and attempt.job.user.email:
        attempt_id = attempt.pk
        from projects.tasks import send_job_end_mail

        # A little later, so that an automatic restart is seen and no mail goes out for it.
        transaction.on_commit(
            lambda: send_job_end_mail.apply_async((attempt_id,), countdown=JOB_END_MAIL_DELAY)
        )


def notification_preference_set(*, user: User, mail_on_job_end: bool) -> NotificationPreference:
    """Opt in to (or out of) a mail when one's jobs end or fail."""
    preference, _ = NotificationPreference.objects.update_or_create(
        user=user, defaults={"mail_on_job_end": mail_on_job_end}
    )
    return preference


def reservations_reconcile(*, older_than: timedelta = timedelta(minutes=10)) -> int:
    """Settle attempts that ended but still hold a reservation (a lost charge task)."""
    from jobs.models import FINAL_STATES, Attempt

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
