"""The project page's burn-down: GPU-hours left of the current period's budget, day by day."""

from datetime import date, timedelta
from decimal import Decimal
from typing import Any

from django.utils import timezone

from projects.selectors import Usage


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
