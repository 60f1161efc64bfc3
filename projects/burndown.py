"""Burn-down: GPU-hours left of the current period's budget day by day (the project page),
and every project's pace against its period (the staff overview)."""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from projects.models import Project
from projects.selectors import Usage, projects_usage


def burn_down(*, usage: Usage, days: list[tuple[date, Decimal]], today: date) -> dict[str, Any]:
    """What project.js draws: the left line, an even-pace line and the budget, all labelled.

    `days` is GPU-hours charged per day (projects.selectors.usage_by_day); only the days
    of the current period count. A point at date d is what was left when d began; the
    last point is what is left now.
    """
    start = timezone.localdate(usage.period_start)
    end = timezone.localdate(usage.period_end)  # the first day of the next period
    used_on = {day: hours for day, hours in days if start <= day < end}
    budget = usage.budget_gpu_hours if usage.has_quota else None
    x, left, used, spent = [], [], [], Decimal(0)
    day = start
    stop = min(today + timedelta(days=1), end)
    while True:
        x.append(day.isoformat())
        used.append(float(spent))
        left.append(float(budget - spent) if budget is not None else None)
        if day >= stop:
            break
        spent += used_on.get(day, Decimal(0))
        day += timedelta(days=1)
    return {
        "days": x,
        "left": left,
        "used": used,
        "daily": [float(used_on.get(date.fromisoformat(d), Decimal(0))) for d in x[:-1]],
        "budget": float(budget) if budget is not None else None,
        "periodStart": start.isoformat(),
        "periodEnd": end.isoformat(),
        "leftNow": float(usage.left_gpu_hours) if budget is not None else None,
        "reserved": float(usage.reserved_gpu_hours),
    }


@dataclass(frozen=True)
class BurnPace:
    """A project's spending against its period: the share of the period gone beside the
    share of the budget spent (used and held by live jobs), and when, at the pace used so
    far, nothing would be left."""

    project: Project
    usage: Usage
    period_share: float  # of the period passed, 0 to 1
    budget_share: float | None  # (used + reserved) / budget; None without a quota
    gpu_hours_per_day: Decimal  # used so far over the days passed
    runs_out_at: datetime | None  # None: no quota, or no use yet at this pace

    @property
    def spent_gpu_hours(self) -> Decimal:
        return self.usage.used_gpu_hours + self.usage.reserved_gpu_hours

    @property
    def out_of_budget(self) -> bool:
        return self.usage.has_quota and self.usage.left_gpu_hours <= 0

    @property
    def on_course_to_run_out(self) -> bool:
        """Nothing left before the period ends, at the pace used so far (or already)."""
        return self.runs_out_at is not None and self.runs_out_at < self.usage.period_end

    @property
    def period_percent(self) -> int:
        return round(self.period_share * 100)

    @property
    def budget_percent(self) -> int | None:
        return None if self.budget_share is None else round(self.budget_share * 100)


def burn_pace(*, project: Project, usage: Usage, at: datetime) -> BurnPace:
    """The pace is what the period's ended attempts used per day passed; what live jobs hold
    counts as spent, so a project holding its whole budget is out of it now."""
    length = (usage.period_end - usage.period_start).total_seconds()
    passed = min(max((at - usage.period_start).total_seconds(), 0.0), length)
    days_passed = Decimal(passed) / Decimal(86400)
    per_day = usage.used_gpu_hours / days_passed if days_passed > 0 else Decimal(0)
    runs_out_at = None
    budget_share = None
    if usage.has_quota:
        budget = usage.budget_gpu_hours
        spent = usage.used_gpu_hours + usage.reserved_gpu_hours
        budget_share = float(spent / budget) if budget > 0 else (1.0 if spent else 0.0)
        if usage.left_gpu_hours <= 0:
            runs_out_at = at
        elif per_day > 0:
            runs_out_at = at + timedelta(days=float(usage.left_gpu_hours / per_day))
    return BurnPace(
        project=project,
        usage=usage,
        period_share=passed / length if length else 1.0,
        budget_share=budget_share,
        gpu_hours_per_day=per_day.quantize(Decimal("0.01")),
        runs_out_at=runs_out_at,
    )


def projects_burn_pace(
    *, projects: Iterable[Project], at: datetime | None = None
) -> list[BurnPace]:
    """Every project's pace, in the order given: three queries (projects_usage)."""
    at = at or timezone.now()
    projects = list(projects)
    usages = projects_usage(projects=projects, at=at)
    return [burn_pace(project=p, usage=usages[p.pk], at=at) for p in projects]
