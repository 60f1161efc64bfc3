import os
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from projects.models import Membership, Project, Quota
from tests import shards

PASSWORD = "correct horse battery staple"


def _user(django_user_model: type[User], username: str, **extra: object) -> User:
    return django_user_model.objects.create_user(
        username=username, password=PASSWORD, email=f"{username}@example.org", **extra
    )


@pytest.fixture
def project(db: None) -> Project:
    project = Project.objects.create(slug="vision", name="Vision models", slurm_account="vision")
    Quota.objects.create(
        project=project,
        gpu_hours_per_period=Decimal("100"),
        max_concurrent_gpus=8,
        max_gpus_per_job=4,
        max_wall_time=timedelta(hours=12),
    )
    return project


@pytest.fixture
def owner(django_user_model: type[User], project: Project) -> User:
    user = _user(django_user_model, "olivia")
    Membership.objects.create(user=user, project=project, role=Membership.Role.OWNER)
    return user


@pytest.fixture
def member(django_user_model: type[User], project: Project) -> User:
    user = _user(django_user_model, "mia")
    Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


@pytest.fixture
def outsider(django_user_model: type[User], db: None) -> User:
    """Logged in, but in no project and not staff: must be refused everywhere."""
    return _user(django_user_model, "oscar")


@pytest.fixture
def staff(django_user_model: type[User], db: None) -> User:
    return _user(django_user_model, "root-admin", is_staff=True, is_superuser=True)


@pytest.fixture(scope="session")
def sandbox_info() -> Iterator[object]:
    """The running sandbox Slurm cluster (`manage.py sandbox up`, idempotent)."""
    if os.geteuid() != 0:
        pytest.skip("the sandbox cluster needs root")
    from clusters import sandbox

    with shards.sandbox_setup(settings.SANDBOX_STATE_DIR):
        info = sandbox.up(settings.SANDBOX_STATE_DIR)
    yield info


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    shards.select(config, items)


@pytest.fixture(autouse=True)
def _sandbox_turn(request: pytest.FixtureRequest) -> Iterator[None]:
    """Sandbox tests of the two shards share the sandbox; disturbing ones hold it alone."""
    if not shards.uses_sandbox(request.node):
        yield
        return
    exclusive = request.node.get_closest_marker("sandbox_exclusive") is not None
    with shards.sandbox_turn(settings.SANDBOX_STATE_DIR, exclusive=exclusive):
        yield
