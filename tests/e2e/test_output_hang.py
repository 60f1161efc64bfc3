"""Hangs of a plain script on the sandbox: no heartbeat helper, no rank labels, only its steps.

The script prints `step i loss l` as researchers' loops do and, on its first attempt,
then sleeps while alive. The steps the poll reads from its stdout are its progress: it
is flagged hung within 2 minutes of its last step, with its last line, and its restart
policy cancels it and starts attempt 2. A healthy plain script that runs past its
startup window beside it is never flagged.
"""

import re
import shlex

import pytest

from jobs.enums import FailureClass, State
from jobs.models import Attempt, JobEvent
from jobs.services import job_submit
from monitoring.models import AttemptProgress
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, run_file, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(600)]

SCRIPT = """
import os, time
for i in range(1, {steps} + 1):
    print(f"step {{i}} loss {{2.5 / i:.4f}}", flush=True)
    time.sleep({pause})
if {hangs} and os.environ["PORTAL_ATTEMPT_NUMBER"] == "1":
    print(f"last step at {{time.time():.3f}}, waiting for the data server", flush=True)
    time.sleep(3600)
print("done", flush=True)
"""


def _plain(steps: int, pause: float, *, hangs: bool) -> str:
    return "python3 -c " + shlex.quote(SCRIPT.format(steps=steps, pause=pause, hangs=hangs))


def test_a_plain_script_that_stops_stepping_is_flagged_and_restarted(
    celery_worker, researcher, project, sandbox_cluster
) -> None:
    common = {"hang_floor_seconds": 30, "hang_multiple": 3.0}
    hung = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="plain script that hangs",
            command=_plain(20, 0.3, hangs=True),
            max_restarts=1,
            restart_on=(FailureClass.HANG,),
            **common,
        ),
    )
    healthy = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="plain script past its startup window",
            command=_plain(80, 0.5, hangs=False),
            startup_window_seconds=20,
            **common,
        ),
    )
    first = Attempt.objects.get(job=hung, number=1)
    wait_for(
        lambda: AttemptProgress.objects.filter(attempt=first, verdict="hang").exists(),
        QUEUE_WAIT + 120,
        "the plain script to be flagged as hung",
    )
    first.refresh_from_db()  # its run directory, known once submitted
    progress = AttemptProgress.objects.get(attempt=first)
    stopped = float(re.findall(r"^last step at ([\d.]+),", run_file(first, "stdout.log"), re.M)[0])
    assert progress.flagged_at is not None
    assert progress.flagged_at.timestamp() - stopped <= 120, progress.why
    assert progress.why.startswith("No step in its output for "), progress.why
    assert "the last step was 20." in progress.why
    assert "Its last line: last step at " in progress.why
    assert progress.culprit_rank is None and progress.ranks == {}

    # Its policy restarts after a hang: attempt 1 is cancelled for it, attempt 2 runs through.
    wait_for(
        lambda: Attempt.objects.filter(
            job=hung, number=2, state__in=[State.COMPLETED, State.FAILED], files_complete=True
        ).exists(),
        QUEUE_WAIT + 60,
        "attempt 2 to finish",
    )
    first.refresh_from_db()
    second = Attempt.objects.get(job=hung, number=2)
    assert second.state == State.COMPLETED, run_file(second, "stdout.log")[-2000:]
    assert first.state == State.CANCELLED and first.failure_class == FailureClass.HANG
    restart = JobEvent.objects.get(attempt=second, to_state=State.QUEUED)
    assert f"after {FailureClass.HANG.label}" in restart.reason

    # The healthy one ran past its 20 s startup window on its printed steps alone.
    wait_for(
        lambda: Attempt.objects.filter(job=healthy, state=State.COMPLETED).exists(),
        QUEUE_WAIT,
        "the healthy script to finish",
    )
    attempt = Attempt.objects.get(job=healthy, number=1)
    calm = AttemptProgress.objects.get(attempt=attempt)
    assert calm.verdict == "" and calm.flagged_at is None, calm.why
    assert calm.pace and calm.pace[-1][1] >= 60  # it was followed: "not flagged" means something
    assert not JobEvent.objects.filter(job=healthy, reason__regex=r"^(Hung|Startup stall)").exists()
