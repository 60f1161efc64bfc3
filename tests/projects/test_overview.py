"""The staff overview (web.overview): budgets' pace, the week's goodput and waste, idle
policies edited in place, the clusters' queues; staff only, every write checked."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.enums import State
from jobs.models import Job
from monitoring.goodput.report import top_wasted_jobs, week_start
from projects.models import IdlePolicy, Project, Reservation
from tests import factories

PAGE = reverse("staff-overview")
THIS_WEEK = week_start(timezone.localdate())


def _edit(slug: str) -> str:
    return reverse("overview-idle-policy", args=[slug])


def _post(**values: str) -> dict[str, str]:
    return {f"idle-vision-{name}": value for name, value in values.items()}


@pytest.fixture
def policy(project: Project) -> IdlePolicy:
    return IdlePolicy.objects.create(project=project, threshold_percent=10)


@pytest.fixture
def busy(project: Project, owner: User, other_job: Job) -> Job:
    """Vision used 95 of its 100 GPU-hours and holds 5; its job and speech's wasted this week."""
    cluster = other_job.cluster
    job, attempt = factories.job(project, owner, cluster, name="burner", state=State.FAILED)
    ended = timezone.now()  # in this week and this period, whatever the day
    factories.usage_charge(attempt, gpu_hours="95", ended_at=ended)
    # Five more held by a live job: out of budget now, whatever the day of the period.
    _, live = factories.job(project, owner, cluster, name="live", state=State.RUNNING)
    Reservation.objects.create(
        attempt=live, project=project, gpus=4, gpu_hours=Decimal(5), created_at=ended
    )
    factories.efficiency_card(attempt, ended_at=ended, productive=3.0, idle=1.0, hung=2.0)
    speech = other_job.attempts.get(number=1)
    factories.efficiency_card(speech, ended_at=ended, productive=1.0, lost=0.5)
    return job


def test_a_visitor_is_sent_to_log_in_and_changes_nothing(client: Client, policy) -> None:
    for response in (client.get(PAGE), client.post(_edit("vision"), _post(watch="on"))):
        assert response.status_code == 302
        assert response["Location"].startswith(reverse("login"))
    assert IdlePolicy.objects.get().threshold_percent == 10


def test_anyone_but_staff_is_refused_and_changes_nothing(
    client: Client, owner: User, outsider: User, policy
) -> None:
    values = _post(watch="on", threshold_percent="50", warn_after="5")
    for user in (owner, outsider):
        client.force_login(user)
        assert client.get(PAGE).status_code == 403
        assert client.post(_edit("vision"), values).status_code == 403
        assert client.post(_edit("vision"), _post()).status_code == 403  # the switch-off
    assert IdlePolicy.objects.get().threshold_percent == 10
    assert not LogEntry.objects.exists()
    client.force_login(owner)
    assert b"overview-link" not in client.get(reverse("home")).content


def test_staff_see_budgets_goodput_waste_policies_and_queues(
    client: Client, staff: User, busy: Job, policy, django_assert_num_queries
) -> None:
    client.force_login(staff)
    # session, user, then the page: projects, quotas, charges, reservations, the weeks'
    # goodput, the week's waste, idle policies, clusters with their jobs counted
    with django_assert_num_queries(10):
        response = client.get(PAGE)
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="overview-link"' in page
    data = response.context["overview"]
    rows = {row.project.slug: row for row in data.rows}
    assert set(rows) == {"vision", "speech"}
    vision = rows["vision"]
    assert vision.pace.usage.left_gpu_hours == Decimal("0.00")
    assert vision.pace.out_of_budget and vision.pace.on_course_to_run_out
    assert [p.project.slug for p in data.at_risk] == ["vision"]
    assert 'id="at-risk"' in page and "out of budget now" in page
    assert vision.week is not None and vision.week.goodput == pytest.approx(0.5)
    assert rows["speech"].week is not None and rows["speech"].week_before is None
    assert [(w.project, w.name, w.wasted_gpu_hours) for w in data.wasted] == [
        ("vision", "burner", 3.0),
        ("speech", "whisper-secret", 0.5),
    ]
    assert vision.form["watch"].value() is True and rows["speech"].form["watch"].value() is False
    [line] = data.clusters
    assert (line.cluster.name, line.waiting, line.running) == ("alps", 1, 1)
    assert reverse("cluster-page", args=["alps"]) + "#h-queue" in page


def test_top_wasted_jobs_of_a_week_cover_every_project(busy: Job) -> None:
    assert [w.project for w in top_wasted_jobs(week=THIS_WEEK, limit=1)] == ["vision"]
    assert top_wasted_jobs(week=THIS_WEEK - timedelta(weeks=1)) == []


def test_staff_edit_a_policy_in_place_behind_csrf(staff: User, policy) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    values = _post(watch="on", threshold_percent="25", warn_after="30", cancel_after="15")
    assert client.post(_edit("vision"), values).status_code == 403  # no CSRF token
    assert IdlePolicy.objects.get().threshold_percent == 10
    client.get(PAGE)
    values["csrfmiddlewaretoken"] = client.cookies["csrftoken"].value
    response = client.post(_edit("vision"), values)
    assert response.status_code == 302
    assert response["Location"] == PAGE + "#policy-vision"
    saved = IdlePolicy.objects.get()
    assert saved.threshold_percent == 25
    assert (saved.warn_after, saved.cancel_after) == (timedelta(minutes=30), timedelta(minutes=15))
    entry = LogEntry.objects.get()
    assert (entry.object_id, entry.user_id) == (str(saved.project_id), staff.pk)
    assert "under 25 %" in entry.get_change_message()
    page = client.get(PAGE).content.decode()
    assert "vision: idle policy saved (warn after 30 min under 25 %, cancel 15 min later)" in page


def test_staff_start_and_stop_watching_a_project(client: Client, staff: User, project) -> None:
    client.force_login(staff)
    client.post(_edit("vision"), _post(watch="on", threshold_percent="5", warn_after="0.5"))
    assert IdlePolicy.objects.get(project=project).warn_after == timedelta(seconds=30)
    client.post(_edit("vision"), _post(threshold_percent="", warn_after=""))
    assert not IdlePolicy.objects.exists()
    assert LogEntry.objects.count() == 2


def test_a_refused_value_is_shown_in_its_row_and_nothing_changes(
    client: Client, staff: User, policy
) -> None:
    client.force_login(staff)
    response = client.post(
        _edit("vision"), _post(watch="on", threshold_percent="10", warn_after="0.1")
    )
    assert response.status_code == 400
    [row] = response.context["overview"].rows
    form = row.form
    assert "greater than or equal to 0:00:10" in str(form.errors["warn_after"])
    assert 'class="has-error"' in response.content.decode()
    assert IdlePolicy.objects.get().warn_after == timedelta(hours=1)
    response = client.post(_edit("vision"), _post(watch="on", warn_after="5"))
    assert response.status_code == 400
    [row] = response.context["overview"].rows
    assert "Say under what utilisation" in str(row.form.errors["threshold_percent"])
    for typo in ("1e15", "nan", "inf"):  # past a year, or no number: refused, never a 500
        response = client.post(
            _edit("vision"), _post(watch="on", threshold_percent="10", warn_after=typo)
        )
        assert response.status_code == 400
    assert IdlePolicy.objects.get().warn_after == timedelta(hours=1)
    assert client.post(_edit("nope"), _post(watch="on")).status_code == 404
