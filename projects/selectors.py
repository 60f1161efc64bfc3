"""Reads on projects: membership lists, budget usage, the usage report."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Count, DecimalField, Q, QuerySet, Sum, Value
from django.db.models.functions import Coalesce, TruncDate
from django.utils import timezone

from projects.access import projects_of_member
from projects.models import Project, Quota, Reservation, UsageCharge
from projects.periods import period_bounds

ZERO = Decimal("0")
HOURS = Decimal("0.01")


def project_list_for_user(*, user: User) -> QuerySet[Project]:
    """Projects the user belongs to, with their quota, in one query."""
    return projects_of_member(user=user).select_related("quota")


@dataclass(frozen=True)
class Hours:
    """GPU-, CPU- and node-hours together: what a period used, or what live jobs hold."""

    gpu: Decimal = ZERO
    cpu: Decimal = ZERO
    node: Decimal = ZERO


@dataclass(frozen=True)
class Meter:
    """One resource's hours in a period; a budget of None is no limit."""

    budget: Decimal | None
    used: Decimal
    reserved: Decimal

    @property
    def left(self) -> Decimal | None:
        return None if self.budget is None else self.budget - self.used - self.reserved


UNMETERED = Meter(budget=None, used=ZERO, reserved=ZERO)


@dataclass(frozen=True)
class Usage:
    """A project's budget in one period; a project without a quota has a zero budget."""

    period: str
    period_start: datetime
    period_end: datetime
    budget_gpu_hours: Decimal
    used_gpu_hours: Decimal
    reserved_gpu_hours: Decimal
    left_gpu_hours: Decimal
    fraction_used: float  # used / budget (reservations not included)
    has_quota: bool = True
    cpu: Meter = UNMETERED
    node: Meter = UNMETERED

    @property
    def percent_used(self) -> int:
        return int(self.fraction_used * 100)


def usage_from(quota: Quota | None, used: Hours, reserved: Hours, at: datetime | None) -> Usage:
    period = quota.period if quota else Quota.Period.MONTH
    start, end = period_bounds(period, at)
    budget = quota.gpu_hours_per_period if quota else ZERO
    used_gpu = used.gpu.quantize(HOURS)
    reserved_gpu = reserved.gpu.quantize(HOURS)
    return Usage(
        period=period,
        period_start=start,
        period_end=end,
        budget_gpu_hours=budget,
        used_gpu_hours=used_gpu,
        reserved_gpu_hours=reserved_gpu,
        left_gpu_hours=budget - used_gpu - reserved_gpu,
        fraction_used=float(used_gpu / budget) if budget else (1.0 if used_gpu else 0.0),
        has_quota=quota is not None,
        cpu=Meter(
            quota.cpu_hours_per_period if quota else None,
            used.cpu.quantize(HOURS),
            reserved.cpu.quantize(HOURS),
        ),
        node=Meter(
            quota.node_hours_per_period if quota else None,
            used.node.quantize(HOURS),
            reserved.node.quantize(HOURS),
        ),
    )


def _quota_or_none(project: Project) -> Quota | None:
    try:
        return project.quota
    except Quota.DoesNotExist:
        return None


def _sum(field: str) -> Coalesce:
    return Coalesce(Sum(field), Value(ZERO), output_field=DecimalField())


_SUM = _sum("gpu_hours")
_SUMS = {"gpu": _sum("gpu_hours"), "cpu": _sum("cpu_hours"), "node": _sum("node_hours")}


def used_gpu_hours(*, project_id: int, start: datetime, end: datetime) -> Decimal:
    total: Decimal = UsageCharge.objects.filter(
        project_id=project_id, ended_at__gte=start, ended_at__lt=end
    ).aggregate(total=_SUM)["total"]
    return total


def used_hours(*, project_id: int, start: datetime, end: datetime) -> Hours:
    """GPU-, CPU- and node-hours charged in [start, end), in one query."""
    return Hours(
        **UsageCharge.objects.filter(
            project_id=project_id, ended_at__gte=start, ended_at__lt=end
        ).aggregate(**_SUMS)
    )


def reserved_gpu_hours(*, project_id: int) -> Decimal:
    return reserved_hours(project_id=project_id).gpu


def reserved_hours(*, project_id: int) -> Hours:
    """What the project's unreleased reservations hold, in one query."""
    return Hours(
        **Reservation.objects.filter(project_id=project_id, released_at__isnull=True).aggregate(
            **_SUMS
        )
    )


@dataclass(frozen=True)
class Held:
    """The project's pending and running attempts: the concurrency limits' counts."""

    gpus: int = 0
    jobs: int = 0


def held_now(*, project_id: int) -> Held:
    """GPUs and jobs of the project's live attempts (one job has one live attempt)."""
    row = Reservation.objects.filter(
        project_id=project_id, released_at__isnull=True, ended_at__isnull=True
    ).aggregate(gpus=Sum("gpus"), jobs=Count("id"))
    return Held(gpus=row["gpus"] or 0, jobs=row["jobs"] or 0)


def held_gpus(*, project_id: int) -> int:
    """GPUs of the project's pending and running attempts (the concurrency limit's count)."""
    return held_now(project_id=project_id).gpus


def project_usage(*, project: Project, at: datetime | None = None) -> Usage:
    """Budget, used, reserved and left in the period containing `at` (now): three queries."""
    quota = Quota.objects.filter(project=project).first()
    start, end = period_bounds(quota.period if quota else Quota.Period.MONTH, at)
    return usage_from(
        quota,
        used_hours(project_id=project.pk, start=start, end=end),
        reserved_hours(project_id=project.pk),
        at,
    )


def _hours_by_project(rows: QuerySet[Any]) -> dict[int, Hours]:
    totals = rows.values("project_id").annotate(
        gpu=Sum("gpu_hours"), cpu=Sum("cpu_hours"), node=Sum("node_hours")
    )
    return {
        row["project_id"]: Hours(row["gpu"] or ZERO, row["cpu"] or ZERO, row["node"] or ZERO)
        for row in totals.values("project_id", "gpu", "cpu", "node")
    }


def projects_usage(*, projects: Iterable[Project], at: datetime | None = None) -> dict[int, Usage]:
    """Usage of many projects in three queries, whatever their number or periods."""
    ids = [p.pk for p in projects]
    if not ids:
        return {}
    quotas = {q.project_id: q for q in Quota.objects.filter(project_id__in=ids)}
    # One conditional sum per period kind: each project counts only its own period.
    windows = {kind: period_bounds(kind, at) for kind in Quota.Period.values}
    in_period = Q()
    for kind, (start, end) in windows.items():
        month_default = Q(project__quota__isnull=True) if kind == Quota.Period.MONTH else Q()
        in_period |= (Q(project__quota__period=kind) | month_default) & Q(
            ended_at__gte=start, ended_at__lt=end
        )
    earliest = min(start for start, _ in windows.values())
    used = _hours_by_project(
        UsageCharge.objects.filter(project_id__in=ids, ended_at__gte=earliest).filter(in_period)
    )
    reserved = _hours_by_project(
        Reservation.objects.filter(project_id__in=ids, released_at__isnull=True)
    )
    return {
        pk: usage_from(quotas.get(pk), used.get(pk, Hours()), reserved.get(pk, Hours()), at)
        for pk in ids
    }


def usage_by_day(*, project: Project, since: date) -> list[tuple[date, Decimal]]:
    """GPU-hours charged per day (by the day the attempt ended), days without use as zero."""
    rows = dict(
        UsageCharge.objects.filter(project=project, ended_at__date__gte=since)
        .annotate(day=TruncDate("ended_at"))
        .values("day")
        .annotate(total=Sum("gpu_hours"))
        .values_list("day", "total")
    )
    today = timezone.localdate()
    days = []
    day = since
    while day <= max(today, max(rows, default=since)):
        days.append((day, (rows.get(day) or ZERO).quantize(HOURS)))
        day = date.fromordinal(day.toordinal() + 1)
    return days


def usage_charges(
    *,
    start: datetime | None = None,
    end: datetime | None = None,
    project_id: int | None = None,
    user_id: int | None = None,
    cluster_id: int | None = None,
) -> QuerySet[UsageCharge]:
    """Ledger entries for the usage report, filtered, with names joined in one query."""
    charges = UsageCharge.objects.select_related("project", "user", "cluster", "attempt__job")
    if start is not None:
        charges = charges.filter(ended_at__gte=start)
    if end is not None:
        charges = charges.filter(ended_at__lt=end)
    if project_id is not None:
        charges = charges.filter(project_id=project_id)
    if user_id is not None:
        charges = charges.filter(user_id=user_id)
    if cluster_id is not None:
        charges = charges.filter(cluster_id=cluster_id)
    return charges


@dataclass(frozen=True)
class UsageRow:
    project: str
    user: str
    cluster: str
    attempts: int
    gpu_hours: Decimal
    cost: Decimal
    cpu_hours: Decimal = ZERO
    node_hours: Decimal = ZERO


def usage_summary(charges: QuerySet[UsageCharge]) -> list[UsageRow]:
    """The filtered ledger summed by project, user and cluster, in one query."""

    rows = (
        charges.values("project__slug", "user__username", "cluster__name")
        .annotate(
            attempts=Count("id"),
            hours=Sum("gpu_hours"),
            cpu=Sum("cpu_hours"),
            node=Sum("node_hours"),
            total_cost=Sum("cost"),
        )
        .order_by("project__slug", "user__username", "cluster__name")
    )
    return [
        UsageRow(
            project=row["project__slug"],
            user=row["user__username"],
            cluster=row["cluster__name"],
            attempts=row["attempts"],
            gpu_hours=row["hours"].quantize(HOURS),
            cost=row["total_cost"].quantize(HOURS),
            cpu_hours=row["cpu"].quantize(HOURS),
            node_hours=row["node"].quantize(HOURS),
        )
        for row in rows
    ]
