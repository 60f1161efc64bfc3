"""What the chaos tests share: jobs that print steps until told to stop, the checks made
once they ended, and the recovery time from a component's return to the next stored data.

The checks, for every attempt of every job a test ran:
- exactly one Slurm job per attempt: the jobs named after the attempt (the name and
  comment the portal gives them) are its own job and no other (sacct where the cluster
  keeps accounting, else squeue, which keeps ended jobs for MinJobAge);
- the stored log is byte for byte the file the job wrote on the cluster;
- the loss series has every step the log printed, with its value;
- the attempt completed, exit status 0, its files read to their end.
"""

import re
import shlex
import subprocess
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, InterfaceError, close_old_connections, connection
from django.db.models import Sum

from clusters.models import Cluster
from clusters.sandbox import daemons
from clusters.sandbox.config import Paths
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.rundir import STDOUT_FILE
from jobs.services import job_submit
from monitoring.logs.store import log_read
from monitoring.models import LogFile
from monitoring.series.read import series_read
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

# A step every 0.2 s until the test writes `stop` into the run directory (the job then
# ends with status 0), so a job runs through every fault however slow the machine is.
# Its time limit ends it if a test dies before writing `stop`.
TRAINER = r"""
i=0
while [ ! -e "$PORTAL_RUN_DIR/stop" ]; do
  i=$((i + 1))
  echo "step $i, loss=0.$((100000 + i))"
  sleep 0.2
done
echo "stopped after $i steps"
""".strip()
STEP_LINE = re.compile(rb"^step (\d+), loss=([0-9.]+)$", re.MULTILINE)
# How long a recovery may take before the test fails (generous: a busy 2-core machine
# starts a Celery worker in seconds; the goal, 5 s, is printed, not asserted).
RECOVERY_WAIT = 120


def submit(user: User, project: object, cluster: Cluster, name: str, command: str = TRAINER) -> Job:
    return job_submit(
        user=user,
        project=project,  # type: ignore[arg-type]
        cluster=cluster,
        spec=spec(name=name, command=command, gpus_per_node=0, time_limit=timedelta(minutes=8)),
    )


def attempts(jobs: Iterable[Job]) -> list[Attempt]:
    return list(Attempt.objects.filter(job__in=list(jobs)).order_by("job_id", "number"))


def stored_bytes(attempt_ids: Iterable[int]) -> int:
    total = LogFile.objects.filter(attempt_id__in=list(attempt_ids), name=STDOUT_FILE).aggregate(
        total=Sum("size")
    )["total"]
    return int(total or 0)


def wait_running(jobs: list[Job], timeout: float = QUEUE_WAIT) -> list[Attempt]:
    """Every job running, with some of its log stored (polling works before the fault)."""

    def running() -> bool:
        found = attempts(jobs)
        return len(found) == len(jobs) and all(
            a.state == State.RUNNING and stored_bytes([a.pk]) > 0 for a in found
        )

    wait_for(running, timeout, f"{len(jobs)} jobs to run and their logs to arrive")
    return attempts(jobs)


def stop(jobs: list[Job]) -> None:
    """Tell each job's trainer to end (as root: the sandbox's nodes are this machine)."""
    for attempt in attempts(jobs):
        Path(attempt.run_dir, "stop").touch()


def wait_finished(jobs: list[Job], timeout: float = QUEUE_WAIT) -> list[Attempt]:
    def finished() -> bool:
        found = attempts(jobs)
        return bool(found) and all(a.is_finished and a.files_complete for a in found)

    wait_for(finished, timeout, "every job to end and its files to be read")
    return attempts(jobs)


def slurm_jobs_named(
    names: list[str], *, since: datetime, accounting: bool
) -> dict[str, list[str]]:
    """Slurm's job ids by job name, from sacct (accounting) or squeue, as root."""
    env = daemons.slurm_env(Paths.of(settings.SANDBOX_STATE_DIR))
    if accounting:
        start = (since - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S")
        argv = ["sacct", "-a", "-X", "-n", "-P", "-S", start, "--format=JobID,JobName"]
    else:
        argv = ["squeue", "-a", "-h", "--states=all", "-O", "JobID:30,Name:200"]
    listed = subprocess.run(
        [*argv, f"--name={','.join(names)}"], env=env, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, f"{shlex.join(argv)} failed: {listed.stderr}"
    found: dict[str, list[str]] = defaultdict(list)
    for line in listed.stdout.splitlines():
        job_id, name = re.split(r"[|\s]+", line.strip(), maxsplit=1)
        found[name.strip()].append(job_id)
    return dict(found)


def assert_exactly_once(found: list[Attempt], *, since: datetime, accounting: bool) -> None:
    names = [a.slurm_job_name for a in found]
    wanted = {a.slurm_job_name: [a.slurm_job_id] for a in found}
    listed: dict[str, list[str]] = {}

    def listed_all() -> bool:  # sacct hears of a job a moment after slurmctld
        nonlocal listed
        listed = slurm_jobs_named(names, since=since, accounting=accounting)
        return set(listed) == set(wanted)

    wait_for(listed_all, 60 if accounting else 5, "Slurm to list every attempt's job")
    assert listed == wanted, f"Slurm's jobs by name {listed}; the attempts' {wanted}"


def assert_log_exact(attempt: Attempt) -> bytes:
    """The stored log is the file on the cluster, byte for byte; returns it."""
    remote = Path(attempt.run_dir, STDOUT_FILE).read_bytes()
    stored = log_read(attempt_id=attempt.pk, file=STDOUT_FILE, offset=0, limit=len(remote) + 1)
    assert stored.size == len(remote), (
        f"attempt {attempt.pk}: stored {stored.size} of {len(remote)}"
    )
    if stored.data != remote:  # no 50 MiB diff in the report: where they part
        at = next(i for i, (a, b) in enumerate(zip(stored.data, remote, strict=False)) if a != b)
        raise AssertionError(f"attempt {attempt.pk}: stored log differs at byte {at}")
    return remote


def assert_series_complete(attempt: Attempt, log: bytes) -> int:
    """Every step line of the log is a point of the loss series; returns how many."""
    steps = [(float(step), float(loss)) for step, loss in STEP_LINE.findall(log)]
    assert steps, f"attempt {attempt.pk} printed no step"
    loss = series_read(attempt_id=attempt.pk, name="loss", max_points=len(steps) + 2)
    points = list(zip(loss.xs, loss.ys, strict=True))
    if points != steps:
        missing = sorted(set(steps) - set(points))
        extra = sorted(set(points) - set(steps))
        raise AssertionError(
            f"attempt {attempt.pk}: {len(points)} points for {len(steps)} steps; "
            f"missing {missing[:10]}, not printed {extra[:10]}"
        )
    return len(steps)


def assert_all_intact(jobs: list[Job], *, since: datetime, accounting: bool) -> list[Attempt]:
    """The four checks above on every attempt of `jobs`, once they ended."""
    found = wait_finished(jobs)
    numbers = [(a.job_id, a.number) for a in found]
    assert numbers == [(j.pk, 1) for j in jobs], f"a job restarted: attempts {numbers}"
    ends = [(a.pk, a.state, a.exit_code) for a in found]
    assert all(end[1:] == (State.COMPLETED, 0) for end in ends), f"attempts ended {ends}"
    assert_exactly_once(found, since=since, accounting=accounting)
    for attempt in found:
        assert_series_complete(attempt, assert_log_exact(attempt))
    return found


@dataclass(frozen=True)
class Mark:
    """A component's return: when, and how many log bytes were stored then."""

    at: float
    stored: int


def _read_db(read: Callable[[], object]) -> object:
    """`read()`, or None while the database is out of reach (its connection made anew)."""
    try:
        return read()
    except (DatabaseError, InterfaceError):
        connection.close()
        close_old_connections()
        return None


def returned(attempt_ids: list[int], at: float | None = None) -> Mark:
    """The mark of a return now (or at `at`, a moment ago)."""
    at = time.monotonic() if at is None else at
    stored = None
    while stored is None:
        stored = _read_db(lambda: stored_bytes(attempt_ids))
        if stored is None:
            time.sleep(0.1)
    return Mark(at, int(stored))  # type: ignore[call-overload]


def seconds_to_recover(attempt_ids: list[int], mark: Mark, what: str) -> float:
    """Seconds from `mark` until polling stored new log bytes and no attempt is UNKNOWN."""

    def recovered() -> bool:
        more = _read_db(lambda: stored_bytes(attempt_ids))
        unknown = _read_db(
            lambda: Attempt.objects.filter(pk__in=attempt_ids, state=State.UNKNOWN).exists()
        )
        return more is not None and more > mark.stored and unknown is False  # type: ignore[operator]

    wait_until_true(recovered, RECOVERY_WAIT, f"polling to store new data after {what}")
    return time.monotonic() - mark.at


def went_unknown(attempt_ids: list[int]) -> bool:
    """Whether any of the attempts was shown UNKNOWN (the cluster out of reach) on the way."""
    return JobEvent.objects.filter(attempt_id__in=attempt_ids, to_state=State.UNKNOWN).exists()


def wait_until_true(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    """As `wait_for`, but looking every 0.05 s: the recovery time is what it measures."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            wait_for(lambda: False, 0, what)
        time.sleep(0.05)
