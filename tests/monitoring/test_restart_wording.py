"""The job page's words after a failure are true for its class: a failure the restart
policy never restarts (or the job's policy does not, or its restarts are used) says "not
restarted" and why, not "attempt 1 of at most 3"; a run that would fail again the same way
offers no bigger run. And the last step for the ETA comes from the command when it says it."""

import pytest
from django.test import Client
from django.urls import reverse

from jobs.enums import FailureClass, State
from jobs.models import Attempt, Job
from jobs.params import params_from_command
from monitoring.job_page.facts import attempt_total_steps
from monitoring.job_page.header import attempt_wording
from monitoring.models import LogFile
from tests import factories

pytestmark = pytest.mark.django_db


def _failed_job(project, owner, failure: str, *, max_restarts: int = 2, number: int = 1):
    job, attempt = factories.job(
        project, owner, factories.cluster(), max_restarts=max_restarts, state=State.FAILED
    )
    if number > 1:
        Attempt.objects.filter(pk=attempt.pk).update(number=number)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED, failure_class=failure)
    return job, Attempt.objects.get(pk=attempt.pk)


@pytest.mark.parametrize(
    ("failure", "number", "attempt_of", "note", "fails_again"),
    [
        (
            FailureClass.CUDA_OOM,
            1,
            "attempt 1, not restarted",
            "Not restarted: CUDA out of memory would fail again the same way.",
            True,
        ),
        (
            FailureClass.MISSING_MODULE,
            1,
            "attempt 1, not restarted",
            "Not restarted: Missing Python module would fail again the same way.",
            True,
        ),
        (
            FailureClass.TIME_LIMIT,  # not in the default policy: no restart, a plan is fine
            1,
            "attempt 1, not restarted",
            "Not restarted: the job's policy does not restart after Time limit.",
            False,
        ),
        (
            FailureClass.NODE_FAILURE,  # restarted: another attempt follows
            1,
            "attempt 1 of at most 3",
            "",
            False,
        ),
        (
            FailureClass.NODE_FAILURE,
            3,
            "attempt 3, not restarted",
            "Not restarted after Node failure: all 2 restarts are used.",
            False,
        ),
    ],
)
def test_the_attempt_count_is_true_for_the_failure_class(
    project, owner, failure: str, number: int, attempt_of: str, note: str, fails_again: bool
) -> None:
    job, attempt = _failed_job(project, owner, failure, number=number)
    assert attempt_wording(job=job, latest=attempt) == (attempt_of, note, fails_again)


def test_a_job_without_restarts_and_a_running_one_keep_the_count(project, owner) -> None:
    job, attempt = _failed_job(project, owner, FailureClass.CUDA_OOM, max_restarts=0)
    assert attempt_wording(job=job, latest=attempt) == ("attempt 1 of 1", "", True)
    running, first = factories.job(project, owner, job.cluster, max_restarts=2)
    Attempt.objects.filter(pk=first.pk).update(state=State.RUNNING)
    first.refresh_from_db()
    assert attempt_wording(job=running, latest=first) == ("attempt 1 of at most 3", "", False)


def test_the_page_says_not_restarted_and_offers_no_bigger_run(project, owner) -> None:
    job, _ = _failed_job(project, owner, FailureClass.CUDA_OOM)
    client = Client()
    client.force_login(owner)
    page = client.get(reverse("job-page", args=[job.pk])).content.decode()
    assert "attempt 1, not restarted" in page and "attempt 1 of at most 3" not in page
    assert "would fail again the same way" in page
    assert "Plan a bigger run" not in page
    # A run stopped by its time limit would not fail again bigger: the plan is offered.
    Attempt.objects.filter(job=job).update(failure_class=FailureClass.TIME_LIMIT)
    page = client.get(reverse("job-page", args=[job.pk])).content.decode()
    assert "Plan a bigger run" in page and "does not restart after Time limit" in page


@pytest.mark.parametrize(
    ("command", "steps"),
    [
        ("portal-examples/ddp_train.py --steps 200", 200),
        ("train.py --max_steps 500 --epochs 3", 500),
        ("run_clm.py --num_train_steps=1200", 1200),
        ("train.py --max-steps 800", 800),
        ("train.py --total-steps 300 --warmup-steps 10", 300),
        ("train.py --epochs 3", None),  # epochs are not steps
    ],
)
def test_the_last_step_comes_from_the_command(project, owner, command: str, steps) -> None:
    job, attempt = factories.job(
        project, owner, factories.cluster(), command=command, params=params_from_command(command)
    )
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) == steps


def test_the_spec_then_the_command_then_the_log(project, owner) -> None:
    command = "train.py --steps 200"
    job, attempt = factories.job(
        project, owner, factories.cluster(), command=command, params=params_from_command(command)
    )
    LogFile.objects.create(attempt=attempt, name="stdout.log", reader_state={"total_steps": 50})
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) == 200  # the command's, asked
    Job.objects.filter(pk=job.pk).update(total_steps=600)
    job.refresh_from_db()
    assert attempt_total_steps(job=job, attempt_id=attempt.pk) == 600
