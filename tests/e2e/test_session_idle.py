"""Idle reclaim of JupyterLab sessions on the sandbox (issue 39, acceptance point 2).

An idle session under a short idle policy is warned, then stopped; a session running a busy
cell under the same policy is not. Both sessions' GPUs read idle (the stand-in nvidia-smi
follows what the session's processes compute, and neither computes), so the GPUs alone
would warn and cancel both: what tells them apart is the kernels' answer, which the
worker's task (monitoring.tasks.ask_session_kernels) asks of each session's JupyterLab
over its owner's SSH login, and which the poll reads back.

Each session gets its project's policy once it is in the state under test (a notebook
saved; a cell running), so that a slow start on a busy machine cannot be taken for idling.
"""

import re
import shlex
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from devtools.servers import Server
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_cancel
from monitoring.models import AttemptActivity
from projects.models import IdlePolicy, Project
from tests.e2e.session_lab import Lab, session_submit
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(1200)]

WARN_AFTER = timedelta(seconds=20)
CANCEL_AFTER = timedelta(seconds=20)
THRESHOLD = 10
LIMIT = timedelta(minutes=20)
SESSION_IDLE = "no kernel of the session ran anything"
# Past the ladder's whole window, the kernels' 30 s verdict and the poll's lag.
LADDER_WAIT = 180
ASKED = re.compile(r"Task monitoring\.tasks\.ask_session_kernels\[[^\]]+\] succeeded")
ASK_FAILED = re.compile(r"Task monitoring\.tasks\.ask_session_kernels\[[^\]]+\] raised")


def _short_policy(project: Project) -> IdlePolicy:
    return IdlePolicy.objects.create(
        project=project,
        threshold_percent=THRESHOLD,
        warn_after=WARN_AFTER,
        cancel_after=CANCEL_AFTER,
    )


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _activity(job: Job) -> AttemptActivity | None:
    return AttemptActivity.objects.filter(attempt__job=job).first()


def _worker_log(worker: Server) -> str:
    return worker.log_path.read_text(errors="replace")


def _started(lab: Lab, job: Job) -> None:
    wait_for(lambda: _attempt(job).state == State.RUNNING, QUEUE_WAIT, "the session to start")
    wait_for(lab.answers, 180, "JupyterLab to answer through the portal")


def _end(job: Job, user: User) -> None:
    job_cancel(job=job, user=user)
    wait_for(lambda: _attempt(job).is_finished, 120, "the session to end")


def test_an_idle_session_is_warned_then_stopped_and_keeps_what_it_saved(
    asgi_server, celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    researcher.email = "alice@example.org"  # the warning's mail
    researcher.save(update_fields=["email"])
    job = session_submit(
        user=researcher, project=project, cluster=sandbox_cluster, name="idle-lab", time_limit=LIMIT
    )
    try:
        lab = Lab(asgi_server, job, researcher)
        _started(lab, job)
        lab.notebook_save("kept.ipynb")
        assert lab.kernels() == []  # nothing runs: a session left open and forgotten
        _short_policy(project)

        member = Client()
        member.force_login(researcher)
        page: list[str] = []

        def warned_on_page() -> bool:
            activity = _activity(job)
            if activity is None or activity.warned_at is None:
                return False
            page.append(member.get(f"/jobs/{job.pk}/").content.decode())
            return 'id="idle-warned-at"' in page[-1]

        wait_for(warned_on_page, LADDER_WAIT, "the idle session to be warned on its page")
        assert 'id="idle-cancel-at"' in page[-1]
        warning = JobEvent.objects.get(job=job, reason__startswith="GPUs idle")
        assert SESSION_IDLE in warning.reason
        assert f"under {THRESHOLD} %" in warning.reason
        subject = f"[portal] Job idle-lab (#{job.pk}): GPUs idle"
        wait_for(lambda: subject in _worker_log(celery_worker), 60, "the warning's mail")
        assert "It is a JupyterLab session" in _worker_log(celery_worker)

        wait_for(
            lambda: _attempt(job).state == State.CANCELLED,
            LADDER_WAIT,
            "the idle session to be cancelled by the idle policy",
        )
        stopped = JobEvent.objects.get(job=job, reason__contains="idle-GPU policy")
        assert stopped.reason.startswith("Cancelled by the project's idle-GPU policy")
        assert SESSION_IDLE in stopped.reason
        activity = _activity(job)
        assert activity is not None and activity.cancelled_at is not None
        # The kernels were asked by the worker's task, never in the poll, and it answered.
        log = _worker_log(celery_worker)
        assert ASKED.search(log) and not ASK_FAILED.search(log)
    finally:
        _end(job, researcher)
    # What JupyterLab saved stays in the session's working directory.
    kept = f"{_attempt(job).run_dir}/kept.ipynb"
    assert alice.run(f"test -s {shlex.quote(kept)} && echo kept").text.strip() == "kept"


def test_a_session_running_a_busy_cell_is_not_warned(
    asgi_server, celery_worker, researcher, project, sandbox_cluster
) -> None:
    job = session_submit(
        user=researcher, project=project, cluster=sandbox_cluster, name="busy-lab", time_limit=LIMIT
    )
    try:
        lab = Lab(asgi_server, job, researcher)
        _started(lab, job)
        kernel = lab.kernel_start()
        # A cell that works on the CPU (or waits on something) for longer than the windows,
        # its GPUs idle all along.
        lab.execute(kernel, "import time\ntime.sleep(900)")
        assert [k["execution_state"] for k in lab.kernels()] == ["busy"]
        asked_before = len(ASKED.findall(_worker_log(celery_worker)))
        _short_policy(project)

        # The GPUs alone would have warned and cancelled it by now: every one idle for more
        # than the whole ladder, by the samples the poll stored.
        whole = (WARN_AFTER + CANCEL_AFTER).total_seconds()

        def idle_past_the_ladder() -> bool:
            activity = _activity(job)
            return bool(
                activity is not None
                and activity.idle_since_x is not None
                and activity.idle_last_x is not None
                and activity.idle_last_x - activity.idle_since_x > whole + 10
            )

        wait_for(idle_past_the_ladder, LADDER_WAIT, "the session's GPUs to idle past the ladder")
        # ...and the worker asked the kernels since the policy came in, more than once (the
        # warning's window, then again when the first verdict expired), and got answers.
        wait_for(
            lambda: len(ASKED.findall(_worker_log(celery_worker))) >= asked_before + 2,
            LADDER_WAIT,
            "the kernels to be asked",
        )
        assert not ASK_FAILED.search(_worker_log(celery_worker))

        attempt = _attempt(job)
        assert attempt.state == State.RUNNING, attempt.reason
        assert attempt.cancel_requested_at is None
        activity = _activity(job)
        assert activity is not None
        assert activity.warned_at is None and activity.cancelled_at is None
        assert not JobEvent.objects.filter(job=job, reason__startswith="GPUs idle").exists()
        assert not JobEvent.objects.filter(job=job, reason__contains="idle-GPU policy").exists()
        assert [k["execution_state"] for k in lab.kernels()] == ["busy"]
    finally:
        _end(job, researcher)
