"""A job that renames itself from inside is cancelled in Slurm through the portal's own
account and charged for its whole run as sacct recorded it (issue 33).

Before, the next poll found no job of the attempt's name, failed the attempt "charged by
the portal's own times", released its reservation and left the Slurm job running.
"""

import pwd
import shlex

import pytest

from clusters.sandbox.config import PORTAL_USER
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_submit
from projects.models import Reservation, UsageCharge
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = [pytest.mark.sandbox, pytest.mark.timeout(300)]

# Long enough that only a cancel ends it within the test's waits.
SLEEP = 240
SACCT_FIELDS = ("State", "ElapsedRaw", "AllocTRES", "JobName")


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _sacct(alice: Connection, job_id: str) -> dict[str, str]:
    argv = ["sacct", "-X", "-n", "-P", "-j", job_id, f"--format={','.join(SACCT_FIELDS)}"]
    last = alice.run(shlex.join(argv)).text.strip().splitlines()[-1]
    return dict(zip(SACCT_FIELDS, last.split("|"), strict=True))


def test_a_job_renaming_itself_is_cancelled_in_slurm_and_charged_its_whole_run(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, alice
) -> None:
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd (no MariaDB or slurmdbd installed)")
    assert sandbox_cluster.has_portal_account
    sandbox_cluster.accounting_enabled = True
    sandbox_cluster.save()
    command = f'scontrol update JobId="$SLURM_JOB_ID" JobName=innocent\nsleep {SLEEP}'
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(name="rename", command=command, gpus_per_node=1),
    )
    wait_for(
        lambda: _attempt(job).state in (State.CANCELLED, State.FAILED),
        QUEUE_WAIT + 60,
        "the renamed job to end",
    )
    attempt = _attempt(job)
    assert attempt.state == State.CANCELLED, attempt.reason
    note = JobEvent.objects.get(attempt=attempt, reason__contains="is named 'innocent'")
    assert "the portal cancelled it through its own account" in note.reason
    assert attempt.cancel_requested_at is not None

    # Slurm ended it: cancelled by the portal's account, long before its sleep was over.
    wait_for(lambda: UsageCharge.objects.filter(attempt=attempt).exists(), 120, "the sacct charge")
    truth = _sacct(alice, attempt.slurm_job_id)
    assert truth["JobName"] == "innocent"
    assert truth["State"] == f"CANCELLED by {pwd.getpwnam(PORTAL_USER).pw_uid}"
    # Charged for the whole run as sacct has it, GPUs included, and nothing more held.
    charge = UsageCharge.objects.get(attempt=attempt)
    assert charge.source == UsageCharge.Source.SACCT
    assert charge.elapsed_seconds == int(truth["ElapsedRaw"]) < SLEEP
    assert charge.gpus == 1 and "gres/gpu=1" in truth["AllocTRES"]
    assert Reservation.objects.get(attempt=attempt).released_at is not None


def test_a_job_requeueing_itself_is_cancelled_and_charged_every_run(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, alice
) -> None:
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd (no MariaDB or slurmdbd installed)")
    sandbox_cluster.accounting_enabled = True
    sandbox_cluster.save()
    # Once the portal has seen it run: requeue itself (Slurm then holds it ~2 minutes on
    # BeginTime before its next run), which the portal's --no-requeue forbade.
    command = (
        'flag="$PORTAL_RUN_DIR/requeued"\n'
        'if [ ! -e "$flag" ]; then\n'
        '  touch "$flag"; sleep 12\n'
        '  scontrol update JobId="$SLURM_JOB_ID" Requeue=1 && scontrol requeue "$SLURM_JOB_ID"\n'
        "fi\n"
        f"sleep {SLEEP}"
    )
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(name="requeue", command=command, gpus_per_node=1),
    )
    wait_for(
        lambda: _attempt(job).state in (State.CANCELLED, State.FAILED, State.COMPLETED),
        QUEUE_WAIT + 60,
        "the requeued job to end",
    )
    attempt = _attempt(job)
    assert attempt.state == State.CANCELLED, attempt.reason
    assert JobEvent.objects.filter(attempt=attempt, reason__contains="was requeued").exists()
    wait_for(lambda: UsageCharge.objects.filter(attempt=attempt).exists(), 120, "the sacct charge")
    # Every run sacct recorded (each a record with --duplicates) is charged.
    argv = ["sacct", "-X", "-D", "-n", "-P", "-j", attempt.slurm_job_id]
    argv.append("--format=State,ElapsedRaw")
    runs = [line.split("|") for line in alice.run(shlex.join(argv)).text.splitlines()]
    assert runs[0][0] == "REQUEUED" and int(runs[0][1]) >= 10
    assert runs[-1][0] == f"CANCELLED by {pwd.getpwnam(PORTAL_USER).pw_uid}"
    charge = UsageCharge.objects.get(attempt=attempt)
    assert charge.source == UsageCharge.Source.SACCT and charge.gpus == 1
    assert charge.elapsed_seconds == sum(int(elapsed) for _state, elapsed in runs)
