"""The login node's sshd killed -9 with every session through it (the poll's among them),
while jobs run; a job is submitted while it is down; then sshd comes back.

The cluster row points at a private sshd of the test's own (same config and host key,
another port: tests/fixtures/sandbox.py), so the other tests' sessions go on.
"""

import time

import pytest
from django.utils import timezone

from tests.chaos.harness import (
    assert_all_intact,
    returned,
    seconds_to_recover,
    stop,
    submit,
    wait_running,
    went_unknown,
)

pytestmark = pytest.mark.sandbox

OUTAGE = 5.0  # seconds without sshd: longer than a poll, so the jobs' states go unknown


def test_sshd_and_its_sessions_killed_while_jobs_run_loses_nothing(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, private_sshd, chaos_report
) -> None:
    since = timezone.now()
    jobs = [submit(researcher, project, sandbox_cluster, f"steady {n}") for n in range(2)]
    running = [a.pk for a in wait_running(jobs)]
    try:
        private_sshd.stop()
        jobs.append(submit(researcher, project, sandbox_cluster, "submitted while sshd is down"))
        time.sleep(OUTAGE)
    finally:
        private_sshd.start()
    seconds = seconds_to_recover(running, returned(running), "sshd came back")
    shown = "shown UNKNOWN meanwhile" if went_unknown(running) else "never shown UNKNOWN"
    chaos_report("sshd-kill", seconds, f"sshd and its sessions down {OUTAGE:.0f} s; jobs {shown}")
    wait_running(jobs)
    stop(jobs)
    assert_all_intact(jobs, since=since, accounting=sandbox_info.accounting)
