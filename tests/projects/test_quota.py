"""Enforcement at submit: the budget, the concurrency limit, where a project may run."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.billing import attempt_reserve
from jobs.enums import State
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.services import job_cancel, job_submit
from projects.models import Project, Quota, Reservation
from projects.quota import QuotaRequest, room_refusal
from projects.selectors import Held, project_usage
from tests import factories

PARTITIONS = {"gpu": factories.GPU_PARTITION}


def _submit(user: User, project: Project, cluster: Cluster, **spec: object) -> Job:
    return job_submit(
        user=user,
        project=project,
        cluster=cluster,
        spec=factories.spec(**spec),
        partitions=PARTITIONS,
    )


def test_submit_reserves_gpus_times_time_limit(submitter, project, cluster, no_submission) -> None:
    job = _submit(
        submitter, project, cluster, nodes=2, gpus_per_node=2, time_limit=timedelta(hours=3)
    )
    reservation = Reservation.objects.get(attempt__job=job)
    assert (reservation.gpus, reservation.gpu_hours) == (4, Decimal("12"))
    usage = project_usage(project=project)
    assert (usage.used_gpu_hours, usage.reserved_gpu_hours) == (0, Decimal("12"))
    assert usage.left_gpu_hours == Decimal("88")
    assert no_submission == [job.attempts.get().pk]


def test_refusal_names_request_and_what_is_left(submitter, project, cluster, no_submission) -> None:
    big = {"nodes": 2, "gpus_per_node": 2, "time_limit": timedelta(hours=12)}  # 48 GPU-h
    _submit(submitter, project, cluster, **big)
    Quota.objects.filter(project=project).update(max_concurrent_gpus=None)
    _submit(submitter, project, cluster, **big)
    with pytest.raises(JobError) as refused:
        _submit(submitter, project, cluster, **big)
    assert refused.value.message == "needs 48 GPU-h, 4 GPU-h left this month in project vision"
    # Nothing half-created: the refused job and its attempt were rolled back.
    assert Job.objects.count() == Attempt.objects.count() == Reservation.objects.count() == 2
    assert no_submission == list(Attempt.objects.order_by("pk").values_list("pk", flat=True))


def test_fractional_hours_in_the_message(submitter, project, cluster, no_submission) -> None:
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("12.5"))
    with pytest.raises(
        JobError, match=r"^needs 16 GPU-h, 12.5 GPU-h left this month in project vision$"
    ):
        _submit(
            submitter, project, cluster, nodes=2, gpus_per_node=2, time_limit=timedelta(hours=4)
        )


def test_concurrency_counts_pending_and_running_gpus(
    submitter, project, cluster, no_submission
) -> None:
    four = {"nodes": 2, "gpus_per_node": 2, "time_limit": timedelta(hours=1)}
    first = _submit(submitter, project, cluster, **four)
    second = _submit(submitter, project, cluster, **four)
    running = second.attempts.get()
    Attempt.objects.filter(pk=running.pk).update(state=State.RUNNING, slurm_job_id="9")
    # Over the concurrency limit only: accepted, waiting in the project's line, unreserved.
    third = _submit(submitter, project, cluster, **four)
    waiting = third.attempts.get()
    assert (third.state, waiting.state) == (State.WAITING, State.WAITING)
    assert waiting.reason == (
        "Waiting for room: project vision has 8 of its 8 concurrent GPUs in use and this job "
        "needs 4. It goes to Slurm when a job of the project ends."
    )
    assert not Reservation.objects.filter(attempt=waiting).exists()
    assert waiting.pk not in no_submission
    # Cancelling the queued job frees its GPUs at once; a new job still waits behind the line.
    job_cancel(job=first, user=submitter)
    assert _submit(submitter, project, cluster, **four).state == State.WAITING


def test_a_job_bigger_than_the_concurrency_limit_is_refused_at_once(
    submitter, project, cluster, no_submission
) -> None:
    Quota.objects.filter(project=project).update(max_concurrent_gpus=2, max_gpus_per_job=None)
    with pytest.raises(JobError) as refused:
        _submit(submitter, project, cluster, nodes=2, gpus_per_node=2)
    assert refused.value.message == (
        "needs 4 GPUs, more than the 2 concurrent GPUs project vision allows at once: "
        "ask for at most 2 GPUs"
    )
    assert not Job.objects.exists()


def test_a_budget_refusal_stays_a_refusal_with_the_line_full(
    submitter, project, cluster, no_submission
) -> None:
    Quota.objects.filter(project=project).update(
        max_concurrent_jobs=1, gpu_hours_per_period=Decimal("5")
    )
    _submit(submitter, project, cluster, nodes=1, gpus_per_node=1, time_limit=timedelta(hours=1))
    with pytest.raises(JobError) as refused:
        _submit(
            submitter, project, cluster, nodes=2, gpus_per_node=2, time_limit=timedelta(hours=2)
        )
    assert refused.value.message == "needs 8 GPU-h, 4 GPU-h left this month in project vision"
    assert Job.objects.count() == 1


def test_project_without_quota_is_refused(submitter, project, cluster, no_submission) -> None:
    Quota.objects.filter(project=project).delete()
    with pytest.raises(JobError, match="has no GPU-hour budget yet: ask an admin"):
        _submit(submitter, project, cluster)
    assert not Job.objects.exists()


def test_allowed_clusters_and_partitions(submitter, project, cluster, no_submission) -> None:
    quota = project.quota
    other = factories.cluster("daint")
    quota.allowed_clusters.add(other)
    with pytest.raises(JobError) as refused:
        _submit(submitter, project, cluster)
    assert refused.value.message == "Project vision may not use cluster alps; choose one of: daint."
    assert refused.value.errors == {"cluster": ["Choose one of: daint."]}
    quota.allowed_clusters.add(cluster)
    quota.allowed_partitions = "debug, a100"
    quota.save()
    with pytest.raises(JobError) as refused:
        _submit(submitter, project, cluster)
    assert refused.value.errors == {"partition": ["Choose one of: debug, a100."]}
    quota.allowed_partitions = "gpu,debug"
    quota.save()
    assert _submit(submitter, project, cluster).pk


def test_reserving_twice_keeps_one_reservation(submitter, project, cluster, no_submission) -> None:
    job = _submit(submitter, project, cluster)
    attempt = job.attempts.get()
    assert attempt_reserve(attempt=attempt).pk == Reservation.objects.get(attempt=attempt).pk
    assert Reservation.objects.count() == 1


def test_restart_attempt_reserves_again_and_can_be_refused(
    submitter, project, cluster, no_submission
) -> None:
    """The restart helper creates attempt 2 and reserves it: the budget applies again."""
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("5"))
    job = _submit(submitter, project, cluster, gpus_per_node=2, time_limit=timedelta(hours=2))
    second = Attempt.objects.create(job=job, number=2)
    with pytest.raises(JobError, match="needs 4 GPU-h, 1 GPU-h left this month"):
        attempt_reserve(attempt=second)
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("8"))
    assert attempt_reserve(attempt=second).gpu_hours == Decimal("4")


def test_quota_update_records_who_changed_what(project, staff) -> None:
    from django.core.exceptions import ValidationError

    from projects.audit import quota_update
    from projects.models import QuotaChange

    changes = quota_update(quota=project.quota, user=staff, gpu_hours_per_period=Decimal("5"))
    assert [(c.field, c.old_value, c.new_value, c.user) for c in changes] == [
        ("gpu_hours_per_period", "100.00", "5.00", staff)
    ]
    with pytest.raises(ValidationError):
        quota_update(quota=project.quota, user=staff, gpu_hours_per_period=Decimal("-1"))
    assert QuotaChange.objects.count() == 1
    assert Quota.objects.get(project=project).gpu_hours_per_period == Decimal("5")


def test_room_is_checked_budgets_first_then_jobs_then_gpus(project: Project) -> None:
    quota = Quota.objects.get(project=project)
    quota.max_concurrent_jobs, quota.cpu_hours_per_period = 2, Decimal("1")
    quota.save()
    request = QuotaRequest(
        project=project,
        cluster=factories.cluster(),
        partition="",
        gpus=0,
        cpus=4,
        nodes=1,
        time_limit=timedelta(hours=1),
    )
    usage = project_usage(project=project)
    # A budget refuses before the line is looked at: waiting would never make room.
    cpu = room_refusal(request=request, quota=quota, held=Held(gpus=0, jobs=2), usage=usage)
    assert cpu == "needs 4 CPU-h, 1 CPU-h left this month in project vision"
    quota.cpu_hours_per_period = None  # blank: no CPU-hour limit
    quota.save()
    usage = project_usage(project=project)
    full = room_refusal(request=request, quota=quota, held=Held(gpus=0, jobs=2), usage=usage)
    assert full == "project vision has 2 of its 2 jobs at once queued or running"
    assert room_refusal(request=request, quota=quota, held=Held(jobs=1), usage=usage) == ""
