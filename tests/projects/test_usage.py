"""Usage reads: many projects in a fixed number of queries, per-day series, the estimate."""

from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.enums import State
from jobs.estimate import job_estimate
from jobs.models import Attempt
from projects.models import Project, Quota, Reservation, UsageCharge
from projects.periods import period_bounds
from projects.selectors import project_usage, projects_usage, usage_by_day
from tests import factories


def _charge(project, user, cluster, *, hours: str, ended_at: datetime) -> UsageCharge:
    _job, attempt = factories.job(project, user, cluster)
    return UsageCharge.objects.create(
        attempt=attempt,
        project=project,
        user=user,
        cluster=cluster,
        gpus=1,
        started_at=ended_at - timedelta(hours=float(hours)),
        ended_at=ended_at,
        elapsed_seconds=int(float(hours) * 3600),
        gpu_hours=Decimal(hours),
        cost=Decimal(0),
        source=UsageCharge.Source.PORTAL,
    )


def test_period_bounds() -> None:
    at = datetime(2026, 11, 17, 13, 5, tzinfo=timezone.get_current_timezone())
    assert [d.date() for d in period_bounds("month", at)] == [date(2026, 11, 1), date(2026, 12, 1)]
    assert [d.date() for d in period_bounds("quarter", at)] == [date(2026, 10, 1), date(2027, 1, 1)]
    assert [d.date() for d in period_bounds("year", at)] == [date(2026, 1, 1), date(2027, 1, 1)]


def test_projects_usage_in_three_queries_whatever_their_periods(member, project) -> None:
    cluster = factories.cluster()
    now = timezone.now()
    month_start, _ = period_bounds("month")
    year_start, _ = period_bounds("year")
    projects = [project]
    for index, period in enumerate(["quarter", "year", "month", "year"]):
        other = Project.objects.create(slug=f"p{index}", name=f"P{index}")
        Quota.objects.create(project=other, gpu_hours_per_period=Decimal("50"), period=period)
        _charge(other, member, cluster, hours="3", ended_at=now - timedelta(minutes=1))
        projects.append(other)
    _charge(project, member, cluster, hours="2", ended_at=now - timedelta(minutes=1))
    # Before this month: counts for the yearly projects only (when in this year).
    earlier = month_start - timedelta(days=1)
    for target in projects:
        _charge(target, member, cluster, hours="5", ended_at=earlier)
    _job, attempt = factories.job(project, member, cluster)
    Reservation.objects.create(
        attempt=attempt, project=project, gpus=1, gpu_hours=Decimal("1.5"), created_at=now
    )
    with CaptureQueriesContext(connection) as queries:
        usages = projects_usage(projects=projects)
    # quotas; charges summed per project in its own period; held reservations
    assert len(queries) == 3
    for target in projects:
        assert usages[target.pk] == project_usage(project=target)
    assert usages[project.pk].used_gpu_hours == Decimal("2")
    assert usages[project.pk].reserved_gpu_hours == Decimal("1.5")
    assert usages[project.pk].left_gpu_hours == Decimal("96.5")
    assert usages[project.pk].fraction_used == 0.02
    in_this_year = earlier >= year_start
    assert usages[projects[2].pk].used_gpu_hours == (Decimal("8") if in_this_year else 3)


def test_usage_by_day_fills_quiet_days(member, project) -> None:
    cluster = factories.cluster()
    today = timezone.localdate()
    noon = timezone.make_aware(datetime.combine(today, datetime.min.time())) + timedelta(hours=12)
    _charge(project, member, cluster, hours="1.25", ended_at=noon - timedelta(days=2))
    _charge(project, member, cluster, hours="2", ended_at=noon - timedelta(days=2))
    _charge(project, member, cluster, hours="4", ended_at=noon)
    series = usage_by_day(project=project, since=today - timedelta(days=3))
    assert series == [
        (today - timedelta(days=3), Decimal("0")),
        (today - timedelta(days=2), Decimal("3.25")),
        (today - timedelta(days=1), Decimal("0")),
        (today, Decimal("4")),
    ]


def test_estimate(member, project) -> None:
    cluster = factories.cluster()
    cluster.price_per_gpu_hour = Decimal("1.9")
    cluster.save()
    _charge(project, member, cluster, hours="87.5", ended_at=timezone.now())
    fits = job_estimate(project=project, cluster=cluster, spec=factories.spec(gpus_per_node=2))
    assert (fits.gpu_hours, fits.cost, fits.left_before, fits.fits, fits.message) == (
        Decimal("0.3333"),
        Decimal("0.63"),
        Decimal("12.5"),
        True,
        "",
    )
    assert fits.left_after == Decimal("12.1667")
    big = factories.spec(nodes=2, gpus_per_node=4, time_limit=timedelta(hours=8))
    refused = job_estimate(project=project, cluster=cluster, spec=big)
    assert (refused.gpu_hours, refused.fits) == (Decimal("64"), False)
    assert refused.message == "needs 64 GPU-h, 12.5 GPU-h left this month in project vision"
    assert not Attempt.objects.exclude(state=State.QUEUED).exists()


def test_estimate_names_the_concurrency_limit(member, project) -> None:
    cluster = factories.cluster()
    _job, attempt = factories.job(project, member, cluster)
    Reservation.objects.create(
        attempt=attempt, project=project, gpus=6, gpu_hours=Decimal("1"), created_at=timezone.now()
    )
    estimate = job_estimate(
        project=project, cluster=cluster, spec=factories.spec(nodes=2, gpus_per_node=2)
    )
    # Over the concurrency limit only: it would be accepted, and wait in the line.
    assert estimate.fits
    assert estimate.message == (
        "Would wait in the project's line: project vision has 6 of its 8 concurrent GPUs in "
        "use and this job needs 4."
    )
