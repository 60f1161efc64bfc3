from collections.abc import Iterator

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs import services as job_services
from portal.celery import app
from projects.models import Project
from tests.jobs import factories


@pytest.fixture
def no_submission(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Records the Slurm submissions job_submit queues instead of sending them to Redis."""
    queued: list[int] = []
    monkeypatch.setattr(job_services, "_queue_submission", queued.append)
    return queued


@pytest.fixture
def eager_celery() -> Iterator[None]:
    """Tasks queued after commit run at once, in the test (mail tasks)."""
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = False


@pytest.fixture
def cluster(db: None) -> Cluster:
    return factories.cluster()


@pytest.fixture
def submitter(member: User, cluster: Cluster, project: Project) -> User:
    """A project member with an account on the cluster."""
    factories.account(cluster, member)
    return member
