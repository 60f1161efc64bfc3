"""Budget periods: the calendar month, quarter or year an instant falls in."""

from datetime import datetime

from django.utils import timezone


def _add_months(start: datetime, months: int) -> datetime:
    index = start.month - 1 + months
    return start.replace(year=start.year + index // 12, month=index % 12 + 1)


def period_bounds(period: str, at: datetime | None = None) -> tuple[datetime, datetime]:
    """[start, end) of the period containing `at`, in the portal's time zone."""
    local = timezone.localtime(at or timezone.now())
    month_start = local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    if period == "year":
        start = month_start.replace(month=1)
        months = 12
    elif period == "quarter":
        start = month_start.replace(month=(local.month - 1) // 3 * 3 + 1)
        months = 3
    else:
        start = month_start
        months = 1
    return start, _add_months(start, months)


def period_words(period: str) -> str:
    """How a refusal says the period: 'this month'."""
    return {"year": "this year", "quarter": "this quarter"}.get(period, "this month")
