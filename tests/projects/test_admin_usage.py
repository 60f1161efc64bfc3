"""Admin pages: usage columns without N+1, audited quota edits, the usage report and CSV."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from projects.models import Project, Quota, QuotaChange, UsageCharge
from tests import factories

REPORT = "admin:projects_usagecharge_report"


def _charge(project, user, cluster, hours: str, *, days_ago: int = 0) -> UsageCharge:
    _job, attempt = factories.job(project, user, cluster)
    attempt.slurm_job_id = "1234"
    attempt.save()
    ended = timezone.now() - timedelta(days=days_ago, minutes=1)
    return UsageCharge.objects.create(
        attempt=attempt,
        project=project,
        user=user,
        cluster=cluster,
        gpus=2,
        started_at=ended - timedelta(hours=float(hours) / 2),
        ended_at=ended,
        elapsed_seconds=int(float(hours) * 1800),
        gpu_hours=Decimal(hours),
        cost=Decimal(hours) * 2,
        source=UsageCharge.Source.PORTAL,
    )


def _projects(count: int) -> None:
    for index in range(count):
        project = Project.objects.create(slug=f"extra-{index}", name=f"Extra {index}")
        Quota.objects.create(project=project, gpu_hours_per_period=Decimal("10"))


def _list_queries(client: Client) -> tuple[int, bytes]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse("admin:projects_project_changelist"))
    assert response.status_code == 200
    return len(queries), response.content


def test_project_list_shows_usage_in_a_fixed_number_of_queries(
    client: Client, staff, member, project
) -> None:
    cluster = factories.cluster()
    _charge(project, member, cluster, "80.5")
    client.force_login(staff)
    few, content = _list_queries(client)
    assert b"80.5" in content  # used
    assert b"19.5" in content  # left
    assert b"80 %" in content
    _projects(6)
    many, content = _list_queries(client)
    assert b"extra-5" in content
    assert many == few


@pytest.mark.parametrize(
    "url",
    [
        reverse("admin:projects_project_changelist"),
        reverse(REPORT),
        reverse(REPORT) + "?format=csv",
        reverse("admin:projects_usagecharge_changelist"),
        reverse("admin:projects_quotachange_changelist"),
    ],
)
def test_admin_usage_pages_refuse_visitors_and_non_staff(
    client: Client, outsider, owner, project, url: str
) -> None:
    response = client.get(url)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    for user in (outsider, owner):  # a project owner is not staff either
        client.force_login(user)
        response = client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
        assert b"gpu_hours" not in response.content


def test_staff_without_view_permission_is_refused_the_report(
    client: Client, django_user_model, project
) -> None:
    clerk = django_user_model.objects.create_user(username="clerk", is_staff=True)
    client.force_login(clerk)
    assert client.get(reverse(REPORT)).status_code == 403


def test_quota_edit_is_audited(client: Client, staff, project) -> None:
    quota = project.quota
    daint = factories.cluster("daint")
    client.force_login(staff)
    response = client.post(
        reverse("admin:projects_quota_change", args=[quota.pk]),
        {
            "project": project.pk,
            "gpu_hours_per_period": "150",
            "period": "quarter",
            "max_concurrent_gpus": "8",
            "max_gpus_per_job": "4",
            "max_wall_time": "12:00:00",
            "allowed_clusters": [daint.pk],
            "allowed_partitions": "gpu",
        },
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    changes = {
        c.field: (c.old_value, c.new_value, c.user) for c in QuotaChange.objects.filter(quota=quota)
    }
    assert changes == {
        "gpu_hours_per_period": ("100.00", "150.00", staff),
        "period": ("month", "quarter", staff),
        "allowed_partitions": ("", "gpu", staff),
        "allowed_clusters": ("", "daint", staff),
    }
    page = client.get(reverse("admin:projects_quota_change", args=[quota.pk])).content.decode()
    assert "History (who changed what, when)" in page
    assert "<td>root-admin</td><td>period</td><td>month</td><td>quarter</td>" in page
    # The trail itself cannot be edited or deleted.
    change = QuotaChange.objects.first()
    assert change is not None
    edit = client.post(reverse("admin:projects_quotachange_change", args=[change.pk]), {})
    assert edit.status_code == 403


def test_quota_edit_in_the_project_page_is_audited(client: Client, staff, project) -> None:
    quota = project.quota
    client.force_login(staff)
    data = {
        "slug": "vision",
        "name": "Vision models",
        "slurm_account": "vision",
        "description": "",
        "quota-TOTAL_FORMS": 1,
        "quota-INITIAL_FORMS": 1,
        "quota-MIN_NUM_FORMS": 0,
        "quota-MAX_NUM_FORMS": 1,
        "quota-0-id": quota.pk,
        "quota-0-project": project.pk,
        "quota-0-gpu_hours_per_period": "100",
        "quota-0-period": "month",
        "quota-0-max_concurrent_gpus": "16",
        "quota-0-max_gpus_per_job": "4",
        "quota-0-max_wall_time": "12:00:00",
        "quota-0-allowed_partitions": "",
        "idle_policy-TOTAL_FORMS": 0,
        "idle_policy-INITIAL_FORMS": 0,
        "idle_policy-MIN_NUM_FORMS": 0,
        "idle_policy-MAX_NUM_FORMS": 1,
        "memberships-TOTAL_FORMS": 0,
        "memberships-INITIAL_FORMS": 0,
        "memberships-MIN_NUM_FORMS": 0,
        "memberships-MAX_NUM_FORMS": 1000,
    }
    response = client.post(reverse("admin:projects_project_change", args=[project.pk]), data)
    assert response.status_code == 302, response.content.decode()[:3000]
    assert list(QuotaChange.objects.values_list("field", "old_value", "new_value", "user")) == [
        ("max_concurrent_gpus", "8", "16", staff.pk)
    ]


def test_project_page_shows_the_slurm_mirror_dry_run(client: Client, staff, project) -> None:
    client.force_login(staff)
    page = client.get(reverse("admin:projects_project_change", args=[project.pk])).content.decode()
    assert (
        "sacctmgr --immediate modify account where name=vision set "
        # The quota's default CPU-hour budget, 16,000 h, in minutes.
        "GrpTRESMins=cpu=960000,node=-1,gres/gpu=6000 GrpTRES=gres/gpu=8 GrpSubmitJobs=-1" in page
    )
    assert "No cluster has quota mirroring switched on" in page


def test_usage_report_filters_and_csv(client: Client, staff, member, owner, project) -> None:
    alps, daint = factories.cluster("alps"), factories.cluster("daint")
    _charge(project, member, alps, "2")
    _charge(project, member, alps, "3")
    _charge(project, owner, daint, "4")
    _charge(project, owner, daint, "8", days_ago=40)  # outside the default window
    client.force_login(staff)
    response = client.get(
        reverse(REPORT), {"start": (timezone.localdate() - timedelta(days=5)).isoformat()}
    )
    page = response.content.decode()
    assert response.status_code == 200
    assert "<td>vision</td><td>mia</td><td>alps</td><td>2</td><td>5.00</td>" in page
    assert "<td>vision</td><td>olivia</td><td>daint</td><td>1</td><td>4.00</td>" in page
    assert 'id="usage-total-hours">9.00<' in page
    only = client.get(
        reverse(REPORT), {"cluster": str(daint.pk), "start": "", "end": ""}
    ).content.decode()
    assert 'id="usage-total-hours">12.00<' in only
    exported = client.get(reverse(REPORT), {"user": member.pk, "format": "csv"})
    assert exported["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(exported.content.decode())))
    assert [(r["user"], r["cluster"], r["gpu_hours"]) for r in rows] == [
        ("mia", "alps", "2.0000"),
        ("mia", "alps", "3.0000"),
    ]
    bad = client.get(reverse(REPORT), {"start": "2026-05-02", "end": "2026-05-01"})
    assert "The end date is before the start date" in bad.content.decode()


def test_ledger_is_read_only_in_admin(client: Client, staff, member, project) -> None:
    charge = _charge(project, member, factories.cluster(), "1")
    client.force_login(staff)
    assert client.get(reverse("admin:projects_usagecharge_add")).status_code == 403
    url = reverse("admin:projects_usagecharge_delete", args=[charge.pk])
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert UsageCharge.objects.filter(pk=charge.pk).exists()


def test_cluster_test_connection_without_an_account_says_what_to_add(client: Client, staff) -> None:
    cluster = factories.cluster()
    client.force_login(staff)
    response = client.post(
        reverse("admin:clusters_cluster_changelist"),
        {"action": "test_connection", "_selected_action": [cluster.pk], "index": 0},
        follow=True,
    )
    assert "Alps: No cluster account to connect as: add one under Cluster accounts." in (
        response.content.decode()
    )


def test_csv_cells_are_never_formulas(client: Client, staff, project, django_user_model) -> None:
    sneaky = django_user_model.objects.create_user(username="@SUM(1+1)")
    _charge(project, sneaky, factories.cluster(), "1")
    client.force_login(staff)
    exported = client.get(reverse(REPORT), {"format": "csv"}).content.decode()
    (row,) = list(csv.DictReader(io.StringIO(exported)))
    assert row["user"] == "'@SUM(1+1)"
