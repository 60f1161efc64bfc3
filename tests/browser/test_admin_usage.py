"""Admin usage pages in Chromium: project list with usage columns, quota history, the report."""

from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import pytest
from django.utils import timezone

from projects.models import Membership, Project, Quota, UsageCharge
from tests import factories
from tests.helpers import PASSWORD, for_docs, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _admin_log_in(page, live_server, username: str) -> None:
    page.goto(live_server.url + "/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")


def _charge(project, user, cluster, hours: str, minutes_ago: int) -> None:
    _job, attempt = factories.job(project, user, cluster, name=f"train-{project.slug}")
    attempt.slurm_job_id = str(1000 + attempt.pk)
    attempt.save()
    ended = timezone.now() - timedelta(minutes=minutes_ago)
    UsageCharge.objects.create(
        attempt=attempt,
        project=project,
        user=user,
        cluster=cluster,
        gpus=4,
        started_at=ended - timedelta(hours=float(hours) / 4),
        ended_at=ended,
        elapsed_seconds=int(float(hours) * 900),
        gpu_hours=Decimal(hours),
        cost=Decimal(hours) * Decimal("2.5"),
        source=UsageCharge.Source.SACCT,
    )


def test_staff_sees_usage_columns_edits_a_quota_and_exports_the_report(
    page, live_server, staff, owner, member, project
) -> None:
    alps, daint = factories.cluster("alps"), factories.cluster("daint")
    _charge(project, member, alps, "62.5", 50)
    _charge(project, owner, daint, "21", 30)
    for slug, budget, used in (
        ("nlp", "400", "96"),
        ("speech", "50", "49.5"),
        ("robotics", "250", "0"),
    ):
        other = Project.objects.create(slug=slug, name=slug.title(), slurm_account=slug)
        Quota.objects.create(project=other, gpu_hours_per_period=Decimal(budget))
        Membership.objects.create(user=member, project=other, role="member")
        if used != "0":
            _charge(other, member, alps, used, 20)

    _admin_log_in(page, live_server, "root-admin")
    page.goto(f"{live_server.url}/admin/projects/project/")
    row = page.locator("#result_list tr", has_text="Vision models")
    assert row.locator("td.field-used").inner_text() == "83.5"
    assert row.locator("td.field-left").inner_text() == "16.5"
    assert "83 %" in row.locator("td.field-used_bar").inner_text()
    assert "99 %" in page.locator("#result_list tr", has_text="Speech").inner_text()
    for_docs(screenshot(page, "admin-projects-usage"), "admin-projects.png")

    page.goto(f"{live_server.url}/admin/projects/quota/{project.quota.pk}/change/")
    page.get_by_label("GPU-hour budget per period").fill("120")
    page.get_by_role("button", name="Save and continue editing").click()
    page.get_by_text("was changed successfully").wait_for()
    history = page.locator("table.quota-history").inner_text()
    assert "gpu_hours_per_period\t100.00\t120.00" in history
    assert "root-admin" in history

    page.goto(f"{live_server.url}/admin/projects/project/{project.pk}/change/")
    dry_run = page.locator(".field-slurm_mirror").inner_text()
    # 120 GPU-h in minutes, and the default 16,000 CPU-h budget
    assert "set GrpTRESMins=cpu=960000,node=-1,gres/gpu=7200 " in dry_run
    assert "No cluster has quota mirroring switched on" in dry_run
    screenshot(page, "admin-project-mirror-dry-run")

    page.goto(f"{live_server.url}/admin/projects/usagecharge/report/")
    page.select_option("#id_cluster", label="alps")
    page.get_by_role("button", name="Show").click()
    page.locator("#usage-summary").wait_for()
    summary = page.locator("#usage-summary tbody").inner_text()
    assert "vision\tmia\talps\t1\t62.50" in summary
    assert "daint" not in summary
    assert page.locator("#usage-total-hours").inner_text() == "208.00"  # 62.5 + 96 + 49.5
    for_docs(screenshot(page, "admin-usage-report"), "admin-usage.png")
    with page.expect_download() as download:
        page.click("#usage-csv")
    lines = Path(download.value.path()).read_text().splitlines()
    assert lines[0].startswith("ended_at,project,user,cluster,job,attempt")
    assert len(lines) == 4  # header and the three alps charges


def test_non_staff_member_is_refused_the_admin_usage_pages(
    page, live_server, member, project
) -> None:
    # mia logs in on the portal's own page (the admin's login refuses non-staff outright).
    page.goto(live_server.url + "/login/")
    page.get_by_label("User name").fill("mia")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(lambda url: "login" not in url)
    for path in ("/admin/projects/project/", "/admin/projects/usagecharge/report/"):
        page.goto(live_server.url + path)
        assert "/admin/login/" in page.url
        assert page.get_by_text("You are authenticated as mia, but are not authorized").is_visible()
        assert "GPU-hour usage report" not in page.content()
