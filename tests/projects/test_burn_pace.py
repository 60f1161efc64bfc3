"""Every project's pace against its period (the staff overview): the share of the period gone
beside the share of the budget spent, and whether it runs out before the period ends."""

from datetime import datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.models import Cluster
from projects.burndown import projects_burn_pace
from projects.models import Project, Quota, Reservation
from tests import factories

pytestmark = pytest.mark.django_db


def _at(day: int, hour: int = 0) -> datetime:
    return timezone.make_aware(datetime(2026, 12, day, hour), timezone.get_current_timezone())


AT = _at(11)  # ten days of December's 31 gone


def _project(slug: str, budget: str | None) -> Project:
    project = Project.objects.create(slug=slug, name=slug.title())
    if budget is not None:
        Quota.objects.create(project=project, gpu_hours_per_period=Decimal(budget))
    return project


def _charge(project: Project, user: User, cluster: Cluster, hours: str, ended: datetime) -> None:
    _, attempt = factories.job(project, user, cluster, name=f"run-{project.slug}")
    factories.usage_charge(attempt, gpu_hours=hours, ended_at=ended)


def _hold(project: Project, user: User, cluster: Cluster, hours: str) -> None:
    _, attempt = factories.job(project, user, cluster, name=f"live-{project.slug}")
    Reservation.objects.create(
        attempt=attempt, project=project, gpus=4, gpu_hours=Decimal(hours), created_at=AT
    )


@pytest.fixture
def paces(django_user_model: type[User], django_assert_num_queries):
    user = django_user_model.objects.create_user(username="pace")
    cluster = factories.cluster()
    fast, slow, spent = _project("fast", "100"), _project("slow", "1000"), _project("spent", "50")
    idle, free = _project("idle", "100"), _project("free", None)
    _charge(fast, user, cluster, "40", _at(5))
    _charge(fast, user, cluster, "7", _at(1) - timedelta(hours=1))  # November's: not counted
    _hold(fast, user, cluster, "10")
    _charge(slow, user, cluster, "40", _at(3))
    _charge(spent, user, cluster, "45", _at(2))
    _hold(spent, user, cluster, "5")
    _charge(free, user, cluster, "12", _at(4))
    projects = [fast, slow, spent, idle, free]
    with django_assert_num_queries(3):  # quotas, charges in each period, live reservations
        found = projects_burn_pace(projects=projects, at=AT)
    return {pace.project.slug: pace for pace in found}


def test_a_fast_project_runs_out_before_the_period_ends(paces) -> None:
    fast = paces["fast"]
    assert fast.period_share == pytest.approx(10 / 31)
    assert fast.period_percent == 32
    assert fast.spent_gpu_hours == Decimal("50")  # 40 used and 10 held
    assert (fast.budget_share, fast.budget_percent) == (0.5, 50)
    assert fast.gpu_hours_per_day == Decimal("4.00")  # 40 over ten days
    # 50 left at 4 a day: twelve and a half days, before January 1
    assert fast.runs_out_at == AT + timedelta(days=12.5)
    assert fast.on_course_to_run_out and not fast.out_of_budget


def test_a_slow_project_is_on_course_to_last(paces) -> None:
    slow = paces["slow"]
    assert slow.budget_percent == 4
    assert slow.runs_out_at == AT + timedelta(days=960 / 4)
    assert not slow.on_course_to_run_out


def test_a_budget_used_and_held_in_full_is_out_now(paces) -> None:
    spent = paces["spent"]
    assert spent.out_of_budget and spent.on_course_to_run_out
    assert spent.runs_out_at == AT
    assert spent.budget_percent == 100


def test_no_use_and_no_quota_never_run_out(paces) -> None:
    idle, free = paces["idle"], paces["free"]
    assert idle.runs_out_at is None and idle.budget_share == 0.0
    assert not idle.on_course_to_run_out
    assert free.budget_share is None and free.runs_out_at is None
    assert free.gpu_hours_per_day == Decimal("1.20")  # its use still has a pace
    assert not free.on_course_to_run_out and not free.out_of_budget
