"""The burn-down's numbers: what was left as each day of the period began, against the budget."""

from datetime import UTC, date, datetime
from decimal import Decimal

from projects.burndown import burn_down
from projects.selectors import Usage


def _usage(budget: str, has_quota: bool = True) -> Usage:
    return Usage(
        period="month",
        period_start=datetime(2026, 12, 1, tzinfo=UTC),
        period_end=datetime(2027, 1, 1, tzinfo=UTC),
        budget_gpu_hours=Decimal(budget),
        used_gpu_hours=Decimal("30"),
        reserved_gpu_hours=Decimal("5"),
        left_gpu_hours=Decimal(budget) - Decimal("35"),
        fraction_used=0.3,
        has_quota=has_quota,
    )


def test_each_point_is_what_was_left_when_the_day_began_and_the_last_is_now(settings) -> None:
    settings.TIME_ZONE = "UTC"
    days = [
        (date(2026, 11, 30), Decimal("50")),  # the previous period: not this budget's
        (date(2026, 12, 1), Decimal("10")),
        (date(2026, 12, 2), Decimal("0")),
        (date(2026, 12, 3), Decimal("20")),
    ]
    chart = burn_down(usage=_usage("100"), days=days, today=date(2026, 12, 3))
    assert chart["days"] == ["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"]
    assert chart["left"] == [100.0, 90.0, 90.0, 70.0]
    assert chart["daily"] == [10.0, 0.0, 20.0]
    assert (chart["budget"], chart["leftNow"]) == (100.0, 65.0)  # live jobs hold 5
    assert (chart["periodStart"], chart["periodEnd"]) == ("2026-12-01", "2027-01-01")


def test_without_a_quota_it_shows_use_and_no_budget(settings) -> None:
    settings.TIME_ZONE = "UTC"
    chart = burn_down(
        usage=_usage("0", has_quota=False),
        days=[(date(2026, 12, 1), Decimal("4"))],
        today=date(2026, 12, 1),
    )
    assert chart["budget"] is None and chart["left"] == [None, None]
    assert chart["used"] == [0.0, 4.0]
