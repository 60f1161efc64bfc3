"""slurmctld stopped and started again while jobs run; a job is submitted while it is down.

The jobs run on in their slurmds meanwhile and end COMPLETED; the job submitted during
the outage makes one Slurm job. Its recovery time is the state's: from slurmctld's
return until a poll of the jobs' state ends without an error; what the logs did
meanwhile is said, not asserted. The controller is the whole sandbox's: this test holds
the sandbox alone, and starts slurmctld again whatever happens.
"""

import time

import pytest
from django.conf import settings
from django.utils import timezone

from clusters.sandbox import daemons
from clusters.sandbox.config import Paths
from jobs.poll.cycle import STATE
from jobs.poll.health import PollFigures, poll_figures
from portal_lib.health import health_read
from tests.chaos.harness import (
    RECOVERY_WAIT,
    assert_all_intact,
    stop,
    stored_bytes,
    submit,
    wait_running,
    wait_until_true,
    went_unknown,
)

pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive]

OUTAGE = 8.0  # seconds without a controller


def _state_polls(cluster_id: int) -> PollFigures:
    return poll_figures(health_read(), cluster_id=cluster_id, part=STATE)


def _seconds_to_state(cluster_id: int, back: float) -> float:
    """Seconds from `back` until a state poll ended cleanly (counted, no error added)."""
    seen = [_state_polls(cluster_id)]

    def clean_poll() -> bool:
        now, before = _state_polls(cluster_id), seen[-1]
        seen.append(now)
        errors = (now.ssh_errors - before.ssh_errors) + (now.failures - before.failures)
        return now.polls > before.polls and not errors

    wait_until_true(clean_poll, RECOVERY_WAIT, "a poll of the jobs' state without an error")
    return time.monotonic() - back


def test_slurmctld_restarted_while_jobs_run_loses_nothing(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, chaos_report
) -> None:
    since = timezone.now()
    paths = Paths.of(settings.SANDBOX_STATE_DIR)
    controller = next(d for d in daemons.daemons(paths) if d.name == "slurmctld")
    jobs = [submit(researcher, project, sandbox_cluster, f"steady {n}") for n in range(2)]
    running = [a.pk for a in wait_running(jobs)]
    try:
        assert daemons.stop(controller), "slurmctld was not running"
        before = stored_bytes(running)
        jobs.append(submit(researcher, project, sandbox_cluster, "submitted while it is down"))
        time.sleep(OUTAGE)
        during = stored_bytes(running) - before
    finally:
        if daemons.running_pid(controller) is None:
            daemons.start(controller, paths)
    seconds = _seconds_to_state(sandbox_cluster.pk, time.monotonic())
    shown = "shown UNKNOWN meanwhile" if went_unknown(running) else "never shown UNKNOWN"
    chaos_report(
        "slurmctld-restart",
        seconds,
        f"state read again; down {OUTAGE:.0f} s, jobs {shown}, "
        f"{during} log bytes stored during the outage",
    )
    wait_running(jobs)
    stop(jobs)
    assert_all_intact(jobs, since=since, accounting=sandbox_info.accounting)
