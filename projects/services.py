"""Writes on projects: demo data, reservations at submit, the ledger when attempts end.

It takes plain values (a QuotaRequest, a Measured use, a Payer) and knows nothing of jobs.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from portal_lib.queueing import queue_on_commit
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
from projects.quota import (
    QuotaRefusal,
    QuotaRequest,
    fmt_hours,
    no_budget_refusal,
    price_of,
    quota_refusal,
)
from projects.selectors import (
    Held,
    held_now,
    reserved_hours,
    usage_from,
    used_gpu_hours,
    used_hours,
)

logger = logging.getLogger(__name__)

DEFAULT_ALERT_THRESHOLDS = (80, 100)
SEND_BUDGET_ALERT = "projects.tasks.send_budget_alert"


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


def reservation_create(*, attempt_id: int, request: QuotaRequest) -> Reservation:
    """Hold the request's GPUs, CPUs and nodes x time limit against its budgets, or refuse.

    Takes the project's quota row lock, so concurrent submissions are checked one after
    the other; call it inside the transaction that creates the attempt. A refusal raises
    QuotaRefusal naming the limit, the request and what is left.
    """
    project = request.project
    with transaction.atomic():
        quota = Quota.objects.select_for_update().filter(project=project).first()
        existing = Reservation.objects.filter(attempt_id=attempt_id).first()
        if existing is not None:
            return existing
        if quota is None:
            raise QuotaRefusal(no_budget_refusal(project))
        start, end = period_bounds(quota.period)
        refusal = quota_refusal(
            request=request,
            quota=quota,
            allowed_clusters=dict(quota.allowed_clusters.values_list("pk", "name")),
            held=held_now(project_id=project.pk) if _counts_held(quota) else Held(),
            usage=usage_from(
                quota,
                used_hours(project_id=project.pk, start=start, end=end),
                reserved_hours(project_id=project.pk),
                None,
            ),
        )
        if refusal is not None:
            raise refusal
        return Reservation.objects.create(
            attempt_id=attempt_id,
            project=project,
            gpus=request.gpus,
            gpu_hours=request.gpu_hours,
            cpus=request.cpus,
            cpu_hours=request.cpu_hours,
            nodes=request.nodes,
            node_hours=request.node_hours,
            created_at=timezone.now(),
        )


def _counts_held(quota: Quota) -> bool:
    return quota.max_concurrent_gpus is not None or quota.max_concurrent_jobs is not None


# --- charges --------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What an attempt really used, and who says so (CPUs and nodes: all nodes' together)."""

    gpus: int
    cpus: int
    nodes: int
    started_at: datetime
    ended_at: datetime
    source: str


@dataclass(frozen=True)
class Payer:
    """Whose budget an attempt's use is charged to, and at what price."""

    attempt_id: int
    project: Project
    user_id: int
    cluster_id: int
    price_per_gpu_hour: Decimal
    price_per_cpu_hour: Decimal


def ledger_lock(*, project_id: int, attempt_id: int) -> bool:
    """Lock the project's quota row and the attempt's reservation; False if already settled.

    Every charge and release runs under this lock, inside the caller's transaction.
    """
    Quota.objects.select_for_update().filter(project_id=project_id).first()
    reservation = Reservation.objects.select_for_update().filter(attempt_id=attempt_id).first()
    if reservation is not None and reservation.released_at is not None:
        return False
    return not UsageCharge.objects.filter(attempt_id=attempt_id).exists()


def reservation_end(*, attempt_id: int) -> None:
    """The attempt's GPUs stop counting towards the concurrency limit; its hours stay held."""
    Reservation.objects.filter(attempt_id=attempt_id, ended_at__isnull=True).update(
        ended_at=timezone.now()
    )


def reservation_release(*, attempt_id: int) -> None:
    """Free the attempt's GPUs and hours (under ledger_lock)."""
    now = timezone.now()
    Reservation.objects.filter(attempt_id=attempt_id, released_at__isnull=True).update(
        released_at=now
    )
    Reservation.objects.filter(attempt_id=attempt_id, ended_at__isnull=True).update(ended_at=now)


def usage_charge(*, payer: Payer, measured: Measured) -> UsageCharge:
    """Under ledger_lock: the ledger entry (once), the release, the budget alerts."""
    seconds = max(int((measured.ended_at - measured.started_at).total_seconds()), 0)
    gpu_hours, cpu_hours, node_hours = (
        (Decimal(count * seconds) / 3600).quantize(Decimal("0.0001"), ROUND_HALF_UP)
        for count in (measured.gpus, measured.cpus, measured.nodes)
    )
    cost = price_of(gpu_hours=gpu_hours, cpu_hours=cpu_hours, prices=payer)
    charge, created = UsageCharge.objects.get_or_create(
        attempt_id=payer.attempt_id,
        defaults={
            "project_id": payer.project.pk,
            "user_id": payer.user_id,
            "cluster_id": payer.cluster_id,
            "gpus": measured.gpus,
            "started_at": measured.started_at,
            "ended_at": measured.ended_at,
            "elapsed_seconds": seconds,
            "gpu_hours": gpu_hours,
            "cpus": measured.cpus,
            "cpu_hours": cpu_hours,
            "nodes": measured.nodes,
            "node_hours": node_hours,
            "cost": cost.quantize(Decimal("0.0001"), ROUND_HALF_UP),
            "source": measured.source,
        },
    )
    reservation_release(attempt_id=payer.attempt_id)
    if created:
        logger.info(
            "charged %s GPU-h, %s CPU-h, %s node-h (%s) to %s for attempt %s",
            fmt_hours(gpu_hours),
            fmt_hours(cpu_hours),
            fmt_hours(node_hours),
            measured.source,
            payer.project.slug,
            payer.attempt_id,
        )
        _budget_alerts(payer.project, at=measured.ended_at)
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
            queue_on_commit(SEND_BUDGET_ALERT, alert.pk)


def wants_job_end_mail(*, user_id: int) -> bool:
    return NotificationPreference.objects.filter(user_id=user_id, mail_on_job_end=True).exists()


def notification_preference_set(*, user: User, mail_on_job_end: bool) -> NotificationPreference:
    """Opt in to (or out of) a mail when one's jobs end or fail."""
    preference, _ = NotificationPreference.objects.update_or_create(
        user=user, defaults={"mail_on_job_end": mail_on_job_end}
    )
    return preference
