from datetime import timedelta
from decimal import Decimal

from django.contrib.auth.models import User
from django.db import transaction

from projects.models import Membership, Project, Quota


@transaction.atomic
def demo_data_create(*, password: str) -> Project:
    """An admin, two researchers and a project with a quota; safe to run again."""
    people: dict[str, User] = {}
    for username, is_admin in (("admin", True), ("alice", False), ("bob", False)):
        user, _ = User.objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = is_admin
        user.email = f"{username}@example.org"
        user.set_password(password)
        user.save()
        people[username] = user
    project, _ = Project.objects.get_or_create(
        slug="vision",
        defaults={"name": "Vision models", "slurm_account": "vision"},
    )
    Quota.objects.get_or_create(
        project=project,
        defaults={
            "gpu_hours_per_period": Decimal("500.00"),
            "max_concurrent_gpus": 4,
            "max_gpus_per_job": 4,
            "max_wall_time": timedelta(hours=24),
        },
    )
    for username, role in (("alice", Membership.Role.OWNER), ("bob", Membership.Role.MEMBER)):
        Membership.objects.update_or_create(
            user=people[username], project=project, defaults={"role": role}
        )
    return project
