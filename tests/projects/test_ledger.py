"""Charging what attempts really used, once each, and the budget that results."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.db import DatabaseError, transaction
from django.utils import timezone

from jobs.billing import attempt_reserve, attempt_settle
from jobs.enums import State
from jobs.models import Attempt
from jobs.services import job_cancel, job_submit
from jobs.states import attempt_transition
from projects.models import (
    BudgetAlert,
    ImmutableError,
    Membership,
    Quota,
    Reservation,
    UsageCharge,
)
from projects.periods import period_bounds
from projects.selectors import project_usage
from projects.services import notification_preference_set
from tests import factories

PARTITIONS = {"gpu": factories.GPU_PARTITION}


def _submit(user, project, cluster, **spec):
    return job_submit(
        user=user,
        project=project,
        cluster=cluster,
        spec=factories.spec(**spec),
        partitions=PARTITIONS,
    )


def _run(
    attempt: Attempt, *, minutes: float, to: str = State.COMPLETED, slurm_id: str = "41"
) -> None:
    """Drive an attempt through Slurm's states as the poll would, ending `minutes` after start."""
    start = timezone.now() - timedelta(hours=1)
    attempt_transition(attempt=attempt, to=State.SUBMITTING)
    attempt_transition(attempt=attempt, to=State.PENDING, slurm_job_id=slurm_id, submitted_at=start)
    attempt_transition(attempt=attempt, to=State.RUNNING, started_at=start)
    attempt_transition(
        attempt=attempt, to=to, ended_at=start + timedelta(minutes=minutes), exit_code=0
    )


def test_a_job_that_ends_early_is_charged_its_real_time(
    submitter, project, cluster, no_submission
) -> None:
    cluster.price_per_gpu_hour = Decimal("2.50")
    cluster.save()
    job = _submit(submitter, project, cluster, gpus_per_node=2, time_limit=timedelta(hours=2))
    attempt = job.attempts.get()
    assert project_usage(project=project).reserved_gpu_hours == Decimal("4")
    _run(attempt, minutes=30)
    charge = UsageCharge.objects.get(attempt=attempt)
    assert (charge.gpus, charge.elapsed_seconds, charge.gpu_hours) == (2, 1800, Decimal("1"))
    assert (charge.cost, charge.source, charge.user, charge.cluster) == (
        Decimal("2.5"),
        UsageCharge.Source.PORTAL,
        submitter,
        cluster,
    )
    usage = project_usage(project=project)
    assert (usage.used_gpu_hours, usage.reserved_gpu_hours, usage.left_gpu_hours) == (
        Decimal("1"),
        0,
        Decimal("99"),
    )
    assert Reservation.objects.get(attempt=attempt).released_at is not None


def test_cancelled_pending_job_is_charged_nothing(
    submitter, project, cluster, no_submission
) -> None:
    queued = _submit(submitter, project, cluster)
    job_cancel(job=queued, user=submitter)
    pending = _submit(submitter, project, cluster)
    attempt = pending.attempts.get()
    attempt_transition(attempt=attempt, to=State.SUBMITTING)
    attempt_transition(attempt=attempt, to=State.PENDING, slurm_job_id="77")
    # squeue reports an exit code (0:0) for a job cancelled while pending.
    attempt_transition(attempt=attempt, to=State.CANCELLED, ended_at=timezone.now(), exit_code=0)
    assert not UsageCharge.objects.exists()
    assert not Reservation.objects.filter(released_at__isnull=True).exists()
    usage = project_usage(project=project)
    assert (usage.used_gpu_hours, usage.reserved_gpu_hours) == (0, 0)


def test_each_attempt_actually_run_is_charged_once(
    submitter, project, cluster, no_submission
) -> None:
    job = _submit(submitter, project, cluster, time_limit=timedelta(hours=1))
    first = job.attempts.get()
    _run(first, minutes=12, to=State.NODE_FAIL, slurm_id="50")
    second = Attempt.objects.create(job=job, number=2, account=first.account)
    attempt_reserve(attempt=second)
    _run(second, minutes=30, slurm_id="51")
    third = Attempt.objects.create(job=job, number=3, account=first.account)
    attempt_reserve(attempt=third)
    job_cancel(job=job, user=submitter)  # attempt 3 never ran
    attempt_settle(attempt=second)  # a repeated settle charges nothing more
    charges = list(
        UsageCharge.objects.order_by("attempt__number").values_list("attempt__number", "gpu_hours")
    )
    assert charges == [(1, Decimal("0.2")), (2, Decimal("0.5"))]
    assert project_usage(project=project).used_gpu_hours == Decimal("0.7")
    assert not Reservation.objects.filter(released_at__isnull=True).exists()


def test_job_that_ran_between_two_polls_is_charged_from_submission(
    submitter, project, cluster, no_submission
) -> None:
    job = _submit(submitter, project, cluster)
    attempt = job.attempts.get()
    submitted = timezone.now() - timedelta(minutes=6)
    attempt_transition(attempt=attempt, to=State.SUBMITTING)
    attempt_transition(attempt=attempt, to=State.PENDING, slurm_job_id="8", submitted_at=submitted)
    attempt_transition(
        attempt=attempt, to=State.COMPLETED, exit_code=0, ended_at=submitted + timedelta(minutes=6)
    )
    assert UsageCharge.objects.get().elapsed_seconds == 360


def test_ledger_entries_are_immutable(submitter, project, cluster, no_submission) -> None:
    job = _submit(submitter, project, cluster)
    _run(job.attempts.get(), minutes=1)
    charge = UsageCharge.objects.get()
    charge.gpu_hours = Decimal("0")
    with pytest.raises(ImmutableError):
        charge.save()
    with pytest.raises(ImmutableError):
        charge.delete()
    assert UsageCharge.objects.get().gpu_hours == Decimal("0.0167")
    # Not even a bulk update or delete gets past the database's trigger.
    with pytest.raises(DatabaseError, match="usage charges are immutable"), transaction.atomic():
        UsageCharge.objects.filter(pk=charge.pk).update(gpu_hours=0)
    with pytest.raises(DatabaseError, match="usage charges are immutable"), transaction.atomic():
        UsageCharge.objects.filter(pk=charge.pk)._raw_delete(using="default")
    assert UsageCharge.objects.get().gpu_hours == Decimal("0.0167")


def test_period_rollover_gives_a_fresh_budget(submitter, project, cluster, no_submission) -> None:
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("2"))
    job = _submit(submitter, project, cluster, gpus_per_node=2, time_limit=timedelta(hours=1))
    _run(job.attempts.get(), minutes=60)
    assert project_usage(project=project).left_gpu_hours == 0
    with pytest.raises(Exception, match="needs 2 GPU-h, 0 GPU-h left this month"):
        _submit(submitter, project, cluster, gpus_per_node=2, time_limit=timedelta(hours=1))
    start, end = period_bounds("month")
    next_month = project_usage(project=project, at=end + timedelta(hours=1))
    assert next_month.period_start == end
    assert (next_month.used_gpu_hours, next_month.left_gpu_hours) == (0, Decimal("2"))
    # The spent period keeps its numbers.
    assert project_usage(project=project, at=start).used_gpu_hours == Decimal("2")


def test_accounting_cluster_holds_the_hours_until_sacct_answers(
    submitter, project, cluster, no_submission, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    from jobs import tasks

    asked: list[int] = []
    monkeypatch.setattr(tasks.charge_from_accounting, "delay", asked.append)
    cluster.accounting_enabled = True
    cluster.save()
    job = _submit(submitter, project, cluster, gpus_per_node=2, time_limit=timedelta(hours=1))
    attempt = job.attempts.get()
    with django_capture_on_commit_callbacks(execute=True):
        _run(attempt, minutes=6)
    assert asked == [attempt.pk]
    assert not UsageCharge.objects.exists()
    reservation = Reservation.objects.get()
    # GPUs free for the concurrency limit, hours still held against the budget.
    assert reservation.ended_at is not None and reservation.released_at is None
    assert project_usage(project=project).reserved_gpu_hours == Decimal("2")


def test_80_percent_mail_is_sent_once_not_per_job(
    submitter,
    owner,
    project,
    cluster,
    no_submission,
    eager_celery,
    django_capture_on_commit_callbacks,
) -> None:
    Quota.objects.filter(project=project).update(
        gpu_hours_per_period=Decimal("10"), max_concurrent_gpus=None
    )
    Membership.objects.create(user=factories_user("otto"), project=project, role="owner")
    # 2, 4, 6, 8 (80 %), 8.5, 9.5 GPU-h: one mail, not one per job past the threshold.
    for limit, minutes in ((2, 120), (2, 120), (2, 120), (2, 120), (2, 30), (1, 60)):
        job = _submit(submitter, project, cluster, time_limit=timedelta(hours=limit))
        with django_capture_on_commit_callbacks(execute=True):
            _run(job.attempts.get(), minutes=minutes, slurm_id=str(job.pk))
    assert len(mail.outbox) == 1
    message = mail.outbox[0]
    assert message.subject == "[portal] Project vision has used 80 % of its GPU-hours"
    assert sorted(message.to) == ["olivia@example.org", "otto@example.org"]
    assert "used 8 of its 10 GPU-hours this month" in message.body
    job = _submit(submitter, project, cluster, time_limit=timedelta(minutes=30))
    with django_capture_on_commit_callbacks(execute=True):
        _run(job.attempts.get(), minutes=30, slurm_id="99")
    assert [m.subject for m in mail.outbox][1:] == [
        "[portal] Project vision has used 100 % of its GPU-hours"
    ]
    assert "New jobs are refused" in mail.outbox[1].body
    assert list(BudgetAlert.objects.order_by("threshold").values_list("threshold", flat=True)) == [
        80,
        100,
    ]


def factories_user(username: str):
    from django.contrib.auth.models import User

    return User.objects.create_user(username=username, email=f"{username}@example.org")


def test_job_end_mail_only_for_users_who_asked(
    submitter, project, cluster, no_submission, eager_celery, django_capture_on_commit_callbacks
) -> None:
    job = _submit(submitter, project, cluster)
    with django_capture_on_commit_callbacks(execute=True):
        _run(job.attempts.get(), minutes=1)
    assert mail.outbox == []
    notification_preference_set(user=submitter, mail_on_job_end=True)
    job = _submit(submitter, project, cluster)
    with django_capture_on_commit_callbacks(execute=True):
        _run(job.attempts.get(), minutes=1, to=State.FAILED, slurm_id="42")
    assert [m.to for m in mail.outbox] == [["mia@example.org"]]
    assert mail.outbox[0].subject == f"[portal] Job train (#{job.pk}) failed"
    assert "attempt 1, ended: Failed" in mail.outbox[0].body
    # An attempt followed by an automatic restart sends nothing; the restart's end does.
    job = _submit(submitter, project, cluster)
    first = job.attempts.get()
    with django_capture_on_commit_callbacks(execute=True):
        _run(first, minutes=1, to=State.NODE_FAIL, slurm_id="43")
        second = Attempt.objects.create(job=job, number=2, account=first.account)
    with django_capture_on_commit_callbacks(execute=True):
        _run(second, minutes=1, slurm_id="44")
    assert [m.subject for m in mail.outbox[1:]] == [f"[portal] Job train (#{job.pk}) completed"]


def test_budget_alerts_come_again_in_a_new_period(
    submitter,
    owner,
    project,
    cluster,
    no_submission,
    eager_celery,
    django_capture_on_commit_callbacks,
) -> None:
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("1"))
    last_month = period_bounds("month")[0] - timedelta(days=3)
    BudgetAlert.objects.create(
        project=project,
        period_start=period_bounds("month", last_month)[0],
        threshold=80,
        used_gpu_hours=Decimal("0.9"),
        sent_at=last_month,
    )
    job = _submit(submitter, project, cluster, time_limit=timedelta(minutes=50))
    with django_capture_on_commit_callbacks(execute=True):
        _run(job.attempts.get(), minutes=50)
    assert [m.subject for m in mail.outbox] == [
        "[portal] Project vision has used 80 % of its GPU-hours"
    ]
    assert BudgetAlert.objects.filter(threshold=80).count() == 2
