"""Jobs through the portal: job_submit, a real Celery worker with beat, the sandbox cluster."""

import shlex
import uuid
from datetime import timedelta

import pytest

from clusters.models import Cluster
from clusters.sandbox.config import NODES
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_cancel, job_submit
from tests.factories import spec
from tests.fixtures.servers import POLL_INTERVAL
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _state(job: Job) -> str:
    return _attempt(job).state


def _submit(researcher, project, cluster: Cluster, **overrides: object) -> Job:
    return job_submit(user=researcher, project=project, cluster=cluster, spec=spec(**overrides))


def _output(alice: Connection, attempt: Attempt) -> str:
    return alice.run(f"cat {shlex.quote(attempt.run_dir + '/stdout.log')}").text


def test_command_job_runs_to_completion(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    job = _submit(researcher, project, sandbox_cluster, command="id -un\necho done-$((6 * 7))")
    wait_for(lambda: _state(job) == State.COMPLETED, QUEUE_WAIT, "the job to complete")
    attempt = _attempt(job)
    job.refresh_from_db()
    assert job.state == State.COMPLETED
    assert attempt.exit_code == 0
    assert attempt.submitted_at and attempt.started_at and attempt.ended_at
    # Slurm's times have whole seconds.
    assert attempt.submitted_at.replace(microsecond=0) <= attempt.started_at <= attempt.ended_at
    assert attempt.node_list in NODES
    states = list(JobEvent.objects.filter(job=job).values_list("to_state", flat=True))
    assert states[:3] == [State.QUEUED, State.SUBMITTING, State.PENDING]
    assert states[-1] == State.COMPLETED
    # The job ran as alice, in a run directory bob cannot read.
    assert _output(alice, attempt).splitlines()[:2] == ["alice", "done-42"]
    assert alice.run(f"stat -c %a {shlex.quote(attempt.run_dir)}").text.strip() == "700"


def test_exit_status_cancel_and_time_limit(
    celery_worker, researcher, project, sandbox_cluster, bob
) -> None:
    failing = _submit(researcher, project, sandbox_cluster, command="echo bye; exit 3")
    sleeper = _submit(researcher, project, sandbox_cluster, command="sleep 300")
    overrun = _submit(
        researcher, project, sandbox_cluster, command="sleep 600", time_limit=timedelta(minutes=1)
    )

    wait_for(lambda: _state(failing) == State.FAILED, QUEUE_WAIT, "exit 3 to fail the job")
    assert _attempt(failing).exit_code == 3

    wait_for(lambda: _state(sleeper) == State.RUNNING, QUEUE_WAIT, "the sleeper to run")
    job_cancel(job=sleeper, user=researcher)
    wait_for(
        lambda: _state(sleeper) == State.CANCELLED, 2 * POLL_INTERVAL + 3, "cancel within two polls"
    )
    # bob may not look into alice's run directory.
    assert bob.run(f"ls {shlex.quote(_attempt(sleeper).run_dir)}").exit_status != 0

    # Slurm checks time limits about every 30 s, then waits KillWait.
    wait_for(lambda: _state(overrun) == State.TIMEOUT, 150, "the time limit")
    overrun.refresh_from_db()
    assert overrun.state == State.TIMEOUT


def test_hostile_text_runs_nothing_unintended(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    canary = f"/tmp/portal-canary-{uuid.uuid4().hex}"
    command = (
        f"printf '%s\\n' '$(touch {canary}-1)' '`touch {canary}-2`' '; touch {canary}-3'\n"
        f'echo "quote\'s \\"kept\\" $PORTAL_JOB_NAME"'
    )
    setup = f"export GREETING='$(touch {canary}-4); `touch {canary}-5`'\necho \"$GREETING\""
    job = _submit(
        researcher, project, sandbox_cluster, name="safe name.v2+x", command=command, setup=setup
    )
    wait_for(lambda: _state(job) == State.COMPLETED, QUEUE_WAIT, "the job to complete")
    output = _output(alice, _attempt(job))
    assert f"$(touch {canary}-1)" in output
    assert f"`touch {canary}-2`" in output
    assert f"; touch {canary}-3" in output
    assert 'quote\'s "kept" safe name.v2+x' in output
    assert f"$(touch {canary}-4); `touch {canary}-5`" in output
    assert alice.run(f"ls {canary}-* 2>/dev/null | wc -l").text.strip() == "0"


@pytest.mark.parametrize("name", ["a;b", "$(touch /tmp/x)", "x`id`", "it's", "a\nb"])
def test_hostile_job_names_are_refused(researcher, project, sandbox_cluster, name: str) -> None:
    from jobs.errors import JobError

    with pytest.raises(JobError) as caught:
        _submit(researcher, project, sandbox_cluster, name=name)
    assert "letters, digits, spaces" in caught.value.errors["name"][0]
    assert not Job.objects.exists()
