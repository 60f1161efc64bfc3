"""One attempt-start service: the first submission and every restart get the same four things.

An attempt row, its reservation, a QUEUED event and a queued submission, in one
transaction; a quota refusal leaves none of them.
"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from jobs import services as job_services
from jobs.enums import FailureClass, State
from jobs.errors import JobError
from jobs.models import Attempt, Job, JobEvent
from jobs.restart import attempt_restart
from jobs.services import attempt_start, job_submit
from projects.models import Project, Quota, Reservation
from tests import factories


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The submissions queued after commit, instead of sending them to Redis."""
    calls: list[int] = []
    monkeypatch.setattr(job_services, "_queue_submission", calls.append)
    return calls


def _started(attempt: Attempt, reason_start: str) -> None:
    reservation = Reservation.objects.get(attempt=attempt)
    assert reservation.gpus == attempt.job.total_gpus
    assert reservation.gpu_hours == Decimal("0.3333")  # 2 GPUs x 10 minutes
    event = JobEvent.objects.get(attempt=attempt, to_state=State.QUEUED)
    assert event.reason.startswith(reason_start)


def test_the_first_submission_starts_attempt_one(
    project: Project, member: User, queued: list[int]
) -> None:
    cluster = factories.cluster()
    factories.account(cluster, member)
    job = job_submit(
        user=member,
        project=project,
        cluster=cluster,
        spec=factories.spec(nodes=2),
        partitions={"gpu": factories.GPU_PARTITION},
    )
    attempt = job.attempts.get()
    assert attempt.number == 1 and attempt.state == State.QUEUED
    _started(attempt, "Submitted by mia.")
    assert queued == [attempt.pk]


def test_a_restart_starts_the_next_attempt_the_same_way(
    project: Project, member: User, queued: list[int]
) -> None:
    cluster = factories.cluster()
    account = factories.account(cluster, member)
    job, first = factories.job(project, member, cluster, nodes=2, max_restarts=1)
    Attempt.objects.filter(pk=first.pk).update(
        account=account, state=State.FAILED, exit_code=1, node_list="n[1-2]"
    )
    first.refresh_from_db()
    second = attempt_restart(
        attempt=first, failure_class=FailureClass.RANK_CRASH, resume_from="/ckpt/step-10"
    )
    assert second is not None
    assert (second.number, second.account, second.resume_from) == (2, account, "/ckpt/step-10")
    _started(second, "Restart 1/1 after")
    assert queued == [second.pk]
    assert Job.objects.get(pk=job.pk).state == State.QUEUED


def test_a_refusal_leaves_nothing_behind(project: Project, member: User, queued: list[int]) -> None:
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("0.1"))
    job, _ = factories.job(project, member, factories.cluster(), time_limit=timedelta(hours=1))
    with pytest.raises(JobError, match=r"needs 1 GPU-h, 0\.1 GPU-h left this month"):
        attempt_start(job=job, number=2, account=None, reason="again")
    assert not Attempt.objects.filter(job=job, number=2).exists()
    assert not Reservation.objects.exists()
    assert not JobEvent.objects.filter(job=job).exists()
    assert queued == []
