"""A controller that does not answer holds up the jobs' state, never their logs.

Slurm's commands wait for slurmctld: while it hangs (overloaded, or stopped in a
debugger), squeue takes as long as its timeout. The poll reads state and files in
separate tasks under separate leases (`jobs.poll.cycle.PARTS`), so the logs keep
arriving during one stuck state poll. The hang is made by this test's own cluster
row: its squeue (in a directory of links to the real commands, as the slow-sbatch
test does) sleeps while a flag file exists, so the shared controller is left alone.
"""

import shlex
import shutil
import time

import pytest
import redis
from django.conf import settings

from clusters.models import DEFAULT_SLURM_BIN_DIR, Cluster
from clusters.sandbox import config
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.cycle import STATE
from jobs.poll.lease import lease_key
from jobs.services import job_submit
from monitoring.logs.store import log_read
from monitoring.models import LogFile
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, Printer, wait_for, worker_tag

pytestmark = pytest.mark.sandbox

HANG_SECONDS = 25  # under the 30 s command timeout: squeue answers late, not never


def _stored(attempt: Attempt) -> int:
    sizes = LogFile.objects.filter(attempt=attempt, name="stdout.log").values_list(
        "size", flat=True
    )
    return next(iter(sizes), 0)


def test_logs_keep_arriving_while_squeue_hangs(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    slow = config.Paths.of(settings.SANDBOX_STATE_DIR).bin.parent / f"hung-slurm-{worker_tag()}"
    shutil.rmtree(slow, ignore_errors=True)
    slow.mkdir(mode=0o755)
    for command in ("sacct", "sacctmgr", "sbatch", "scancel", "scontrol", "sinfo"):
        (slow / command).symlink_to(f"/usr/bin/{command}")
    flag = slow / "hang"
    shim = slow / "squeue"
    shim.write_text(
        f'#!/bin/sh\n[ -e {flag} ] && sleep {HANG_SECONDS}\nexec /usr/bin/squeue "$@"\n'
    )
    shim.chmod(0o755)
    Cluster.objects.filter(pk=sandbox_cluster.pk).update(slurm_bin_dir=str(slow))
    client = redis.Redis.from_url(settings.REDIS_URL)
    printer = Printer.new(every=0.25)
    try:
        job = job_submit(
            user=researcher,
            project=project,
            cluster=sandbox_cluster,
            spec=spec(command=printer.command),
        )
        attempt = Attempt.objects.get(job=job)
        wait_for(lambda: _stored(attempt) > 0, QUEUE_WAIT, "the job to run and print")
        flag.touch()
        hung_at = time.monotonic()
        # One state poll is stuck in squeue for HANG_SECONDS, holding its lease all along
        # (the same token); count how often the stored log grows meanwhile.
        holder, grown, size, first_growth = None, 0, _stored(attempt), None

        def grew_during_one_stuck_poll() -> bool:
            nonlocal holder, grown, size, first_growth
            token = client.get(lease_key(sandbox_cluster.pk, STATE))
            now = _stored(attempt)
            if token is None or token != holder:
                holder, grown, size = token, 0, now  # another poll: count afresh
                return False
            if now > size:
                grown, size = grown + 1, now
                first_growth = first_growth or time.monotonic() - hung_at
            return grown >= 3

        wait_for(grew_during_one_stuck_poll, 120, "the log to grow 3 times in one stuck poll")
        print(
            f"CHAOS squeue hang: the log grew {grown} times during one stuck state poll, "
            f"the first new bytes {first_growth:.1f} s after the hang began"
        )
    finally:
        flag.unlink(missing_ok=True)
        printer.stop()
    try:
        wait_for(
            lambda: Attempt.objects.filter(pk=attempt.pk, files_complete=True).exists(),
            QUEUE_WAIT,
            "the job to end and its log to be read",
        )
    finally:
        Cluster.objects.filter(pk=sandbox_cluster.pk).update(slurm_bin_dir=DEFAULT_SLURM_BIN_DIR)
        shutil.rmtree(slow, ignore_errors=True)
    attempt.refresh_from_db()
    assert attempt.state == State.COMPLETED
    remote = alice.run(f"cat {shlex.quote(attempt.run_dir + '/stdout.log')}").stdout
    stored = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=len(remote) + 1)
    assert stored.data == remote
    assert Printer.whole(remote), remote[-200:]
