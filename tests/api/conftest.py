"""A project with a job whose attempt has a log, a loss series and GPU samples; tokens per persona."""

from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from accounts.services import token_issue, token_revoke
from clusters.models import Cluster
from jobs.models import Attempt, Job
from monitoring.logs import Delivery, log_files, log_store
from monitoring.series import series_append
from projects.models import Membership, Project
from tests.jobs import factories

LOG = b"step 1 loss 0.9\nstep 2 loss 0.7\nstep 3 loss 0.5\n"


@pytest.fixture
def viewer(django_user_model: type[User], project: Project) -> User:
    user = django_user_model.objects.create_user(username="vera")
    Membership.objects.create(user=user, project=project, role=Membership.Role.VIEWER)
    return user


@pytest.fixture
def cluster(db: None) -> Cluster:
    cluster = factories.cluster()
    factories.account(cluster, None)  # the shared service account every submitter uses
    # The inventory as cached after a read of the cluster (this one is not reachable).
    cache.set(f"clusters:partitions:{cluster.pk}", {"gpu": factories.GPU_PARTITION}, 600)
    return cluster


def store_log(attempt: Attempt, data: bytes, name: str = "stdout.log") -> None:
    files = log_files(attempt_ids=[attempt.pk], names=[name])
    offset = files[(attempt.pk, name)].size
    log_store(files=files, deliveries=[Delivery(attempt.pk, name, offset, data)])


@pytest.fixture
def job(project: Project, owner: User, cluster: Cluster) -> Job:
    """The owner's job with data to read: log, loss, one GPU's utilization."""
    job, attempt = factories.job(project, owner, cluster, name="resnet", cpus_per_task=1)
    store_log(attempt, LOG)
    now = timezone.now().timestamp()
    series_append(
        points=[
            *((attempt.pk, "loss", float(step), 1.0 / step) for step in range(1, 6)),
            *((attempt.pk, "gpu/n1/0/utilization", now + i, 90.0 + i) for i in range(3)),
        ]
    )
    return job


@pytest.fixture
def other_job(django_user_model: type[User], cluster: Cluster) -> Job:
    """A job of another project, which no one above may see or count."""
    elsewhere = Project.objects.create(slug="speech", name="Speech secrets")
    stranger = django_user_model.objects.create_user(username="samuel-stranger")
    Membership.objects.create(user=stranger, project=elsewhere, role=Membership.Role.OWNER)
    job, attempt = factories.job(elsewhere, stranger, cluster, name="whisper-secret")
    store_log(attempt, b"secret log\n")
    return job


@dataclass
class Tokens:
    owner: str
    owner_read: str
    member: str
    viewer: str
    outsider: str
    expired: str
    revoked: str


@pytest.fixture
def tokens(owner: User, member: User, viewer: User, outsider: User) -> Tokens:
    def issue(user: User, scope: str = "submit") -> str:
        return token_issue(user=user, name="test", scope=scope).text

    expired = token_issue(user=owner, name="old", scope="submit")
    expired.token.expires_at = timezone.now() - timedelta(seconds=1)
    expired.token.save(update_fields=["expires_at"])
    revoked = token_issue(user=owner, name="lost laptop", scope="submit")
    assert token_revoke(user=owner, token_id=revoked.token.pk)
    return Tokens(
        owner=issue(owner),
        owner_read=issue(owner, "read"),
        member=issue(member),
        viewer=issue(viewer),
        outsider=issue(outsider),
        expired=expired.text,
        revoked=revoked.text,
    )


def bearer(token: str | None) -> Client:
    """A client that sends the token as `Authorization: Bearer` (none: anonymous)."""
    if token is None:
        return Client()
    return Client(headers={"Authorization": f"Bearer {token}"})
