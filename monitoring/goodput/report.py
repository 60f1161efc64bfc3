"""Goodput per project, user and ISO week: the stored cards' GPU-hours by part, summed in SQL.

An attempt counts in the week its charge ended (as the usage ledger counts it),
in the portal's time zone. Goodput is productive GPU-hours over charged ones;
queued time is shown beside them and never charged.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any, cast

from django.db.models import Count, DateField, F, Q, QuerySet, Sum
from django.db.models.functions import TruncWeek
from django.utils import timezone

from monitoring.goodput.efficiency import PARTS
from monitoring.models import EfficiencyCard

WASTE_PARTS = ("hung", "idle", "lost")
PAGE_WEEKS = 8  # weeks on the project page, this one included
_GROUPS = {"project": "attempt__job__project__slug", "user": "attempt__job__user__username"}


PART_TITLES = {
    "startup": "Startup",
    "productive": "Productive",
    "declared_pauses": "Declared pauses",
    "hung": "Hung",
    "idle": "Idle",
    "lost": "Lost",
}


def hours_text(value: float | None) -> str:
    """GPU-hours as the page and the CSV both print them."""
    return "" if value is None else f"{value:.3f}"


def share_text(value: float | None) -> str:
    """A goodput (0.25) as both print it, in percent: `25.0`; empty when nothing was charged."""
    return "" if value is None else f"{value * 100:.1f}"


def part_column(part: str) -> str:
    return f"{part}_gpu_hours"


@dataclass(frozen=True)
class GoodputRow:
    week: date  # its Monday
    project: str = ""
    user: str = ""
    attempts: int = 0
    gpu_hours: float = 0.0  # charged: what the parts sum to
    queued_gpu_hours: float = 0.0
    parts: dict[str, float] = field(default_factory=dict)

    @property
    def goodput(self) -> float | None:
        """Productive over charged GPU-hours; None when nothing was charged."""
        return self.parts.get("productive", 0.0) / self.gpu_hours if self.gpu_hours > 0 else None

    @property
    def wasted_gpu_hours(self) -> float:
        return sum(self.parts.get(part, 0.0) for part in WASTE_PARTS)

    @property
    def iso_week(self) -> str:
        return iso_week(self.week)

    @property
    def part_list(self) -> list[tuple[str, float]]:
        return [(part, self.parts.get(part, 0.0)) for part in PARTS]


def week_start(day: date) -> date:
    """The Monday of `day`'s ISO week."""
    return day - timedelta(days=day.weekday())


def iso_week(monday: date) -> str:
    year, week, _ = monday.isocalendar()
    return f"{year}-W{week:02d}"


def parse_iso_week(text: str) -> date:
    """`2026-W48` (what `<input type="week">` sends) as its Monday; ValueError if it is none."""
    year, _, week = text.strip().upper().partition("-W")
    if not (year.isdigit() and week.isdigit()):
        raise ValueError(f"{text!r} is no ISO week: write it as 2026-W48.")
    return date.fromisocalendar(int(year), int(week), 1)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=timezone.get_current_timezone())


def cards_in_weeks(*, first: date | None, last: date | None) -> QuerySet[EfficiencyCard]:
    """Cards whose attempt ended from the Monday `first` to the end of the week of `last`."""
    cards = EfficiencyCard.objects.filter(ended_at__isnull=False)
    if first is not None:
        cards = cards.filter(ended_at__gte=_midnight(week_start(first)))
    if last is not None:
        cards = cards.filter(ended_at__lt=_midnight(week_start(last) + timedelta(days=7)))
    return cards


def _sums() -> dict[str, Any]:
    return {
        "attempts": Count("pk"),
        "gpu_hours_sum": Sum("gpu_hours"),
        "queued_sum": Sum("queued_gpu_hours"),
        **{f"{part}_sum": Sum(part_column(part)) for part in PARTS},
    }


def goodput_rows(
    cards: QuerySet[EfficiencyCard], *, by: Sequence[str] = ("project",)
) -> list[GoodputRow]:
    """The cards' sums per week and per `by` ("project", "user"): one query, newest week first."""
    keys = [_GROUPS[name] for name in by]
    found = (
        cards.annotate(week=TruncWeek("ended_at", output_field=DateField()))
        .values("week", *keys)
        .annotate(**_sums())
        .order_by("-week", *keys)
    )
    return [
        GoodputRow(
            week=row["week"],
            project=row.get(_GROUPS["project"], ""),
            user=row.get(_GROUPS["user"], ""),
            attempts=row["attempts"],
            gpu_hours=row["gpu_hours_sum"] or 0.0,
            queued_gpu_hours=row["queued_sum"] or 0.0,
            parts={part: row[f"{part}_sum"] or 0.0 for part in PARTS},
        )
        for row in found
    ]


def rows_total(rows: Iterable[GoodputRow], **labels: Any) -> GoodputRow:
    """Rows added up (a week's users into the week), labelled with `labels`."""
    rows = list(rows)
    return GoodputRow(
        week=labels.pop("week", rows[0].week if rows else date.min),
        attempts=sum(r.attempts for r in rows),
        gpu_hours=sum(r.gpu_hours for r in rows),
        queued_gpu_hours=sum(r.queued_gpu_hours for r in rows),
        parts={part: sum(r.parts.get(part, 0.0) for r in rows) for part in PARTS},
        **labels,
    )


@dataclass(frozen=True)
class ProjectGoodput:
    first: date
    last: date
    weeks: list[GoodputRow]  # newest first, one per week with any card
    users: list[GoodputRow]  # per week and user
    total: GoodputRow

    @property
    def first_week(self) -> str:
        return iso_week(self.first)

    @property
    def last_week(self) -> str:
        return iso_week(self.last)


def project_goodput(
    *, project_id: int, first: date | None = None, last: date | None = None
) -> ProjectGoodput:
    """One project's goodput per week and per user and week (one query); by default the
    last PAGE_WEEKS weeks, this one included."""
    last = week_start(last or timezone.localdate())
    first = week_start(first) if first else last - timedelta(weeks=PAGE_WEEKS - 1)
    cards = cards_in_weeks(first=first, last=last).filter(attempt__job__project_id=project_id)
    users = goodput_rows(cards, by=("user",))
    weeks: dict[date, list[GoodputRow]] = {}
    for row in users:
        weeks.setdefault(row.week, []).append(row)
    return ProjectGoodput(
        first=first,
        last=last,
        weeks=[rows_total(rows, week=week) for week, rows in weeks.items()],
        users=users,
        total=rows_total(users, week=first),
    )


@dataclass(frozen=True)
class WastedJob:
    job_id: int
    name: str
    user: str
    attempts: int
    gpu_hours: float
    parts: dict[str, float]
    project: str = ""

    @property
    def wasted_gpu_hours(self) -> float:
        return sum(self.parts.values())


def _most_wasted(cards: QuerySet[EfficiencyCard], *, limit: int) -> list[WastedJob]:
    """The cards' jobs that wasted most GPU-hours (hung, idle, lost): one query."""
    waste = sum((F(part_column(part)) for part in WASTE_PARTS[1:]), F(part_column(WASTE_PARTS[0])))
    found = (
        cards.values(
            "attempt__job_id",
            "attempt__job__name",
            "attempt__job__user__username",
            "attempt__job__project__slug",
        )
        .annotate(
            attempts=Count("pk"),
            gpu_hours_sum=Sum("gpu_hours"),
            wasted=Sum(waste),
            **{f"{part}_sum": Sum(part_column(part)) for part in WASTE_PARTS},
        )
        .filter(Q(wasted__gt=0))
        .order_by("-wasted", "attempt__job_id")[:limit]
    )
    return [
        WastedJob(
            job_id=row["attempt__job_id"],
            name=row["attempt__job__name"],
            user=row["attempt__job__user__username"],
            attempts=row["attempts"],
            gpu_hours=row["gpu_hours_sum"] or 0.0,
            parts={part: row[f"{part}_sum"] or 0.0 for part in WASTE_PARTS},
            project=row["attempt__job__project__slug"],
        )
        for row in cast(Iterable[dict[str, Any]], found)
    ]


def wasted_jobs(*, project_id: int, week: date, limit: int = 5) -> list[WastedJob]:
    """The project's jobs that wasted most GPU-hours (hung, idle, lost) in the week: one query."""
    cards = cards_in_weeks(first=week, last=week).filter(attempt__job__project_id=project_id)
    return _most_wasted(cards, limit=limit)


def top_wasted_jobs(*, week: date, limit: int = 10) -> list[WastedJob]:
    """Every project's jobs that wasted most GPU-hours in the week, with their project: one
    query (the staff overview)."""
    return _most_wasted(cards_in_weeks(first=week, last=week), limit=limit)
