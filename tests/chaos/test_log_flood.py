"""A job floods its log (53 MiB in about a second, then exits) beside another tenant's job.

The flood drains over several polls (a poll reads more of a file the further behind it
is: monitoring/logs/store.py); the flooding job is never shown with its files read before
every byte is stored; and bob's job, polled through his own account in the same polls,
keeps its log flowing meanwhile.
"""

import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.rundir import STDOUT_FILE
from projects.models import Membership
from tests.chaos.harness import (
    assert_all_intact,
    assert_exactly_once,
    assert_log_exact,
    attempts,
    stop,
    stored_bytes,
    submit,
    wait_running,
)
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox

LINES = 999_999  # 56 bytes each: 53.4 MiB
FLOOD = f"seq -f 'flood line %08g of a burst of output, 50 MiB in all' 1 {LINES}"
FLOOD_BYTES = LINES * 56
MIB = 1024 * 1024


@dataclass
class Sample:
    at: float
    complete: bool
    state: str
    stored: int
    other: int


def _sample(flood: Attempt, other: Attempt) -> Sample:
    # files_complete first: the stored size, read after it, can only have grown since.
    state, complete = Attempt.objects.values_list("state", "files_complete").get(pk=flood.pk)
    return Sample(
        time.monotonic(), complete, state, stored_bytes([flood.pk]), stored_bytes([other.pk])
    )


def test_a_53_mib_flood_is_stored_whole_before_it_is_done_and_others_flow(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, chaos_report
) -> None:
    since = timezone.now()
    bob = User.objects.get(username="bob")
    Membership.objects.create(user=bob, project=project, role=Membership.Role.MEMBER)
    steady = submit(bob, project, sandbox_cluster, "another tenant")
    (other,) = wait_running([steady])
    flood_job: Job = submit(researcher, project, sandbox_cluster, "flood", command=FLOOD)
    wait_for(lambda: attempts([flood_job])[0].run_dir, QUEUE_WAIT, "the flood to be submitted")
    (flood,) = attempts([flood_job])
    log = Path(flood.run_dir, STDOUT_FILE)
    wait_for(lambda: log.exists() and log.stat().st_size == FLOOD_BYTES, QUEUE_WAIT, "the flood")
    written = time.monotonic()
    samples = [_sample(flood, other)]
    deadline = written + QUEUE_WAIT
    while not samples[-1].complete:
        assert time.monotonic() < deadline, f"the flood not read in {QUEUE_WAIT} s: {samples[-1]}"
        time.sleep(0.05)
        samples.append(_sample(flood, other))
    done = samples[-1].at

    shown_done_early = [s for s in samples if s.complete and s.stored < FLOOD_BYTES]
    assert not shown_done_early, f"files read shown at {shown_done_early[0].stored} bytes"
    # It had ended while its bytes were still coming in: what the rule is for.
    assert any(s.state == State.COMPLETED and s.stored < FLOOD_BYTES for s in samples)
    draining = [s for s in samples if 0 < s.stored < FLOOD_BYTES]
    grew = [b.at for a, b in pairwise(draining) if b.other > a.other]
    assert len(grew) >= 2, f"bob's log grew {len(grew)} times while the flood drained"
    stall = max(b - a for a, b in pairwise([draining[0].at, *grew, draining[-1].at]))

    flood = Attempt.objects.get(pk=flood.pk)
    assert (flood.state, flood.exit_code) == (State.COMPLETED, 0)
    assert_log_exact(flood)
    assert_exactly_once([flood], since=since, accounting=sandbox_info.accounting)
    chaos_report(
        "log-flood",
        done - written,
        f"{FLOOD_BYTES / MIB:.1f} MiB written in a burst, stored whole that long after; "
        f"bob's log grew {len(grew)} times meanwhile, its longest pause {stall:.1f} s",
    )
    stop([steady])
    assert_all_intact([steady], since=since, accounting=sandbox_info.accounting)
