"""Fork and resume from a chosen checkpoint on the sandbox.

The example trainer runs 60 steps, a checkpoint every 10. A fork from step 20 with a new
learning rate (over the API) starts at step 21 with it and its page names its parent; the
original, resumed from step 20 on its page, runs its steps 21-60 again with its own rate.
"""

import re

import pytest
from django.test import Client

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.models import Checkpoint
from monitoring.series.read import series_read
from tests.helpers import QUEUE_WAIT, run_file, submit_ddp_example, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(900)]

ARGS = "--steps 60 --checkpoint-every 10 --keep 10 --lr 0.01"
FIRST_STEP = re.compile(r"^step (\d+), loss=", re.MULTILINE)


def _ended(job: Job, number: int) -> Attempt:
    wait_for(
        lambda: Attempt.objects.filter(
            job=job, number=number, state__in=(State.COMPLETED, State.FAILED), files_complete=True
        ).exists(),
        QUEUE_WAIT + 180,
        f"attempt {number} of job #{job.pk} to end and be read",
    )
    return Attempt.objects.get(job=job, number=number)


def test_fork_from_step_20_with_a_new_learning_rate_and_resume_the_original(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    parent = submit_ddp_example(
        alice, researcher, project, sandbox_cluster, name="fork parent", args=ARGS
    )
    first = _ended(parent, 1)
    assert first.state == State.COMPLETED, run_file(first, "stdout.log")[-3000:]
    saved = Checkpoint.objects.filter(attempt=first, complete=True).values_list("step", flat=True)
    assert sorted(s for s in saved if s is not None) == [10, 20, 30, 40, 50, 60]
    step_20 = f"{first.run_dir}/checkpoints/step-20.pt"

    client = Client()
    client.force_login(researcher)
    command = parent.command.replace("--lr 0.01", "--lr 0.003")
    answer = client.post(
        f"/api/v1/jobs/{parent.pk}/fork/",
        {"step": 20, "command": command, "name": "lr 0.003 from step 20"},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    fork = Job.objects.get(pk=answer.json()["id"])
    # The original, resumed from its step 20 on its page, beside the fork.
    resumed = client.post(
        f"/jobs/{parent.pk}/resume/", {"attempt": "1", "checkpoint": "step-20.pt"}
    )
    assert resumed.status_code == 302

    forked = _ended(fork, 1)
    log = run_file(forked, "stdout.log")
    assert forked.state == State.COMPLETED, log[-3000:]
    assert forked.resume_from == step_20
    assert f"resumed from {step_20} at step 20" in log
    assert "learning rate 0.01 -> 0.003: --lr replaces the checkpoint's" in log
    assert int(FIRST_STEP.findall(log)[0]) == 21 and "done at step 60" in log
    assert series_read(attempt_id=forked.pk, name="loss").xs[0] == 21
    fork.refresh_from_db()
    assert (fork.parent_id, fork.parent_step, fork.params["lr"]) == (parent.pk, 20, 0.003)
    page = client.get(f"/jobs/{fork.pk}/").content.decode()
    assert f'Forked from <a href="/jobs/{parent.pk}/">fork parent (#{parent.pk})</a>' in page
    assert "at step <strong>20</strong>" in page

    second = _ended(parent, 2)
    log2 = run_file(second, "stdout.log")
    assert second.state == State.COMPLETED, log2[-3000:]
    assert second.resume_from == step_20
    assert int(FIRST_STEP.findall(log2)[0]) == 21 and "learning rate" not in log2
    # Its own line: the same losses as attempt 1 from step 21 (the same rate, the same data).
    again = series_read(attempt_id=second.pk, name="loss")
    before = dict(zip(*_points(first), strict=True))
    assert again.xs[0] == 21 and all(before[x] == y for x, y in zip(*_points(second), strict=True))
    parent.refresh_from_db()
    assert parent.state == State.COMPLETED


def _points(attempt: Attempt) -> tuple[list[float], list[float]]:
    series = series_read(attempt_id=attempt.pk, name="loss")
    return list(series.xs), list(series.ys)
