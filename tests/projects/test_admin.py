from datetime import timedelta
from decimal import Decimal

from django.test import Client
from django.urls import reverse

from projects.models import IdlePolicy, Membership, Project, Quota


def test_project_list_and_search(client: Client, staff, project) -> None:
    client.force_login(staff)
    response = client.get(reverse("admin:projects_project_changelist"), {"q": "visi"})
    assert response.status_code == 200
    assert b"Vision models" in response.content


def _inline_management(prefix: str, total: int, initial: int) -> dict[str, object]:
    return {
        f"{prefix}-TOTAL_FORMS": total,
        f"{prefix}-INITIAL_FORMS": initial,
        f"{prefix}-MIN_NUM_FORMS": 0,
        f"{prefix}-MAX_NUM_FORMS": 1000,
    }


def test_create_project_with_quota_and_member(client: Client, staff, outsider) -> None:
    client.force_login(staff)
    data = {
        "slug": "nlp",
        "name": "Language models",
        "slurm_account": "nlp",
        "description": "",
        **_inline_management("quota", 1, 0),
        "quota-0-gpu_hours_per_period": "250.5",
        "quota-0-period": "month",
        "quota-0-max_concurrent_gpus": "16",
        "quota-0-max_gpus_per_job": "8",
        "quota-0-max_wall_time": "24:00:00",
        # The idle-GPU policy: warn after 30 min under 5 %, cancel 1 h later.
        **_inline_management("idle_policy", 1, 0),
        "idle_policy-0-threshold_percent": "5",
        "idle_policy-0-warn_after": "00:30:00",
        "idle_policy-0-cancel_after": "01:00:00",
        **_inline_management("memberships", 1, 0),
        "memberships-0-user": outsider.pk,
        "memberships-0-role": "owner",
    }
    response = client.post(reverse("admin:projects_project_add"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    project = Project.objects.get(slug="nlp")
    policy = IdlePolicy.objects.get(project=project)
    assert (policy.threshold_percent, policy.warn_after, policy.cancel_after) == (
        5,
        timedelta(minutes=30),
        timedelta(hours=1),
    )
    assert project.quota.gpu_hours_per_period == Decimal("250.50")
    assert project.quota.max_wall_time.total_seconds() == 24 * 3600
    assert Membership.objects.get(project=project).user == outsider


def test_bad_slurm_account_name_is_refused(client: Client, staff) -> None:
    client.force_login(staff)
    data = {
        "slug": "x",
        "name": "X",
        "slurm_account": "x; rm -rf /",
        **_inline_management("quota", 0, 0),
        **_inline_management("idle_policy", 0, 0),
        **_inline_management("memberships", 0, 0),
    }
    response = client.post(reverse("admin:projects_project_add"), data)
    assert response.status_code == 200
    assert b"Slurm account names allow no spaces" in response.content
    assert not Project.objects.filter(slug="x").exists()


def test_edit_quota(client: Client, staff, project) -> None:
    client.force_login(staff)
    quota = project.quota
    response = client.post(
        reverse("admin:projects_quota_change", args=[quota.pk]),
        {
            "project": project.pk,
            "gpu_hours_per_period": "42",
            "period": "quarter",
            "max_concurrent_gpus": "",
            "max_gpus_per_job": "2",
            "max_wall_time": "02:00:00",
        },
    )
    assert response.status_code == 302
    quota.refresh_from_db()
    assert (quota.gpu_hours_per_period, quota.period, quota.max_concurrent_gpus) == (
        Decimal("42"),
        Quota.Period.QUARTER,
        None,
    )


def test_membership_list_filters_by_role(client: Client, staff, owner, member) -> None:
    client.force_login(staff)
    response = client.get(reverse("admin:projects_membership_changelist"), {"role": "owner"})
    assert b"olivia" in response.content
    assert b"mia" not in response.content


def test_membership_list_query_count_is_fixed(
    client: Client, staff, project, django_user_model, django_assert_max_num_queries
) -> None:
    for n in range(30):
        user = django_user_model.objects.create(username=f"person{n}")
        Membership.objects.create(user=user, project=project)
    client.force_login(staff)
    # session, user, count x2, page (project and user joined), project filter choices
    with django_assert_max_num_queries(8):
        response = client.get(reverse("admin:projects_membership_changelist"))
    assert response.status_code == 200


def test_an_idle_policy_window_too_short_is_refused_naming_the_minimum(
    client: Client, staff, project
) -> None:
    client.force_login(staff)
    response = client.get(reverse("admin:projects_project_change", args=[project.pk]))
    assert b"idle_policy-TOTAL_FORMS" in response.content
    data = {
        "slug": "vision",
        "name": "Vision models",
        "slurm_account": "vision",
        "description": "",
        **_inline_management("quota", 1, 1),
        "quota-0-id": project.quota.pk,
        "quota-0-project": project.pk,
        "quota-0-gpu_hours_per_period": "100",
        "quota-0-period": "month",
        "quota-0-max_concurrent_gpus": "8",
        "quota-0-max_gpus_per_job": "4",
        "quota-0-max_wall_time": "12:00:00",
        **_inline_management("idle_policy", 1, 0),
        "idle_policy-0-threshold_percent": "10",
        "idle_policy-0-warn_after": "00:00:03",
        **_inline_management("memberships", 0, 0),
    }
    response = client.post(reverse("admin:projects_project_change", args=[project.pk]), data)
    assert response.status_code == 200
    assert b"greater than or equal to 0:00:10" in response.content
    assert not IdlePolicy.objects.exists()
