"""The project page: members, quota and usage over time, latest jobs; members and staff only."""

from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.enums import State
from projects.models import Project, UsageCharge
from tests import factories


def test_logged_out_visitor_is_sent_to_login(client: Client, project: Project) -> None:
    response = client.get(reverse("project-page", args=["vision"]))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_outsider_is_refused(client: Client, outsider: User, project: Project) -> None:
    client.force_login(outsider)
    assert client.get(reverse("project-page", args=["vision"])).status_code == 404
    assert client.get(reverse("project-page", args=["nope"])).status_code == 404


def test_member_sees_members_usage_and_jobs(
    client: Client, member: User, owner: User, project: Project, django_assert_num_queries
) -> None:
    cluster = factories.cluster()
    _, attempt = factories.job(project, owner, cluster, name="big-run", state=State.COMPLETED)
    now = timezone.now()
    UsageCharge.objects.create(
        attempt=attempt,
        project=project,
        user=owner,
        cluster=cluster,
        gpus=5,
        started_at=now - timedelta(hours=2, minutes=30),
        ended_at=now,
        elapsed_seconds=9000,
        gpu_hours=Decimal("12.5"),
        cost=Decimal("0"),
        source=UsageCharge.Source.PORTAL,
    )
    client.force_login(member)
    # session, user, project (with quota), members, jobs, quota, used, reserved, code
    # snapshots kept, checkpoint bytes by job and the quota's rule (their jobs: none here),
    # charges by day, goodput by user and week
    with django_assert_num_queries(13):
        response = client.get(reverse("project-page", args=["vision"]))
    text = response.content.decode()
    assert "olivia" in text and "Owner" in text
    assert "mia" in text and "Member" in text
    assert "big-run" in text
    usage = response.context["usage"]
    assert usage.used_gpu_hours == Decimal("12.50")
    assert usage.left_gpu_hours == Decimal("87.50")
    chart = response.context["chart"]
    # The burn-down: 100 GPU-h when the period began, 87.5 left once today's 12.5 are spent.
    assert chart["budget"] == 100.0
    assert chart["left"][0] == 100.0 and chart["left"][-1] == 87.5
    assert chart["daily"][-1] == 12.5 and chart["leftNow"] == 87.5
    assert chart["periodStart"] == timezone.localdate(usage.period_start).isoformat()
    assert 'id="usage-data"' in text


def test_staff_sees_any_project(client: Client, staff: User, project: Project) -> None:
    client.force_login(staff)
    assert client.get(reverse("project-page", args=["vision"])).status_code == 200


def test_the_page_shows_cpu_and_node_hours_and_their_limits(
    client: Client, owner: User, project: Project, django_assert_num_queries
) -> None:
    cluster = factories.cluster()
    _, attempt = factories.job(project, owner, cluster, name="cpu-run", state=State.COMPLETED)
    now = timezone.now()
    project.quota.cpu_hours_per_period = Decimal("100")
    project.quota.max_concurrent_jobs = 5
    project.quota.save()
    UsageCharge.objects.create(
        attempt=attempt,
        project=project,
        user=owner,
        cluster=cluster,
        gpus=0,
        cpus=8,
        cpu_hours=Decimal("16"),
        nodes=2,
        node_hours=Decimal("4"),
        started_at=now - timedelta(hours=2),
        ended_at=now,
        elapsed_seconds=7200,
        gpu_hours=Decimal("0"),
        cost=Decimal("0"),
        source=UsageCharge.Source.PORTAL,
    )
    client.force_login(owner)
    # The same thirteen queries: CPU and node hours are summed beside the GPU-hours.
    with django_assert_num_queries(13):
        text = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert 'id="quota-cpu-used">16.0<' in text
    assert 'id="quota-cpu-left">84.0 of 100<' in text
    assert 'id="quota-node-used">4.0<' in text
    assert 'id="quota-node-left">no limit<' in text
    assert "5 jobs queued or running at once" in text
    assert "jobs up to 12 h." in text  # not Python's "12:00:00" (or "1 day, 0:00:00")
