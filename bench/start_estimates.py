"""How close expected starts come: ours against `squeue --start` alone and the naive "now".

On the sandbox (3 nodes x 2 GPUs), three tenants submit a realistic mix: 1, 2 or 4 GPUs
(2 nodes x 2), time limits of 1 to 3 minutes, each job running 15-60 % of its limit, as
jobs do (they end early, checkpoint, fail). After FILL jobs have made a queue, MEASURED
new jobs arrive about every ARRIVAL seconds. For each, before it is submitted:
- ours: `sbatch --test-only` as its user (clusters.slurm.test_only, the form's ask),
  corrected by jobs.queue.accuracy from the jobs that have started so far, each with
  Slurm's first estimate as squeue reported it and when (as the poll records them);
- squeue --start alone: the first StartTime squeue reports for the job once submitted
  (its estimate while pending; the start itself if it was already running);
- naive: it starts now.
Then every job runs to its end, and each prediction's absolute error against the actual
start is summarised (median and p90) in one table.

Needs root and the sandbox (`manage.py sandbox up`); its own database `portal_bench`.
Run: `.venv/bin/python bench/start_estimates.py` (`--quick`: a few short jobs).
"""

import os
import random
import shlex
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import QUICK, bench_cluster, ensure_database  # noqa: E402

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

FILL = 4 if QUICK else 10
MEASURED = 6 if QUICK else 50
ARRIVAL = 2.0 if QUICK else 9.0  # mean seconds between new jobs (exponential)
LIMITS = (1,) if QUICK else (1, 2, 3)  # minutes
RUN_FRACTION = (0.1, 0.25) if QUICK else (0.15, 0.6)
SHAPES = ((1, 1), (1, 2), (2, 2))  # nodes, GPUs per node
SHAPE_WEIGHTS = (0.6, 0.3, 0.1)
TENANTS = ("alice", "bob", "carol")
READ_EVERY = 2.0  # seconds between squeue reads, as a poll would
SEED = 35


@dataclass
class BenchJob:
    tenant: str
    options: list[str]
    run_seconds: int
    measured: bool
    slurm_id: str = ""
    asked_at: datetime | None = None
    ours: datetime | None = None
    submitted_at: datetime | None = None
    squeue_first: datetime | None = None  # first StartTime squeue reported
    squeue_read_at: datetime | None = None
    pending_estimate: bool = False  # that first StartTime was a pending job's estimate
    corrected: bool = False  # ours had a history to correct by (MIN_SAMPLES estimates)
    started: datetime | None = None


def _mix(rng: random.Random, count: int, *, measured: bool) -> list[BenchJob]:
    jobs = []
    for _ in range(count):
        nodes, gpus = rng.choices(SHAPES, SHAPE_WEIGHTS)[0]
        limit = rng.choice(LIMITS)
        run = max(3, int(limit * 60 * rng.uniform(*RUN_FRACTION)))
        options = [
            f"--nodes={nodes}",
            "--ntasks-per-node=1",
            "--cpus-per-task=1",
            f"--gres=gpu:{gpus}",
            f"--time={limit}",
        ]
        jobs.append(BenchJob(rng.choice(TENANTS), options, run, measured))
    return jobs


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from django.utils import timezone

    from clusters.models import ClusterAccount
    from clusters.selectors import account_endpoint
    from clusters.slurm import Slurm
    from clusters.ssh import Connection
    from jobs.queue.accuracy import Sample, history_of

    cluster = bench_cluster()
    tools = cluster.slurm_tools
    name = f"bench-starts-{os.getpid()}"
    connections = {
        tenant: Connection(
            account_endpoint(account=ClusterAccount.objects.get(cluster=cluster, username=tenant))
        )
        for tenant in TENANTS
    }
    slurms = {tenant: Slurm(c, tools=tools) for tenant, c in connections.items()}
    reader = slurms["alice"]
    rng = random.Random(SEED)
    jobs = _mix(rng, FILL, measured=False) + _mix(rng, MEASURED, measured=True)

    def submit(job: BenchJob) -> None:
        argv = tools.wrap(
            [
                "sbatch",
                "--parsable",
                *job.options,
                f"--job-name={name}",
                "--output=/dev/null",
                f"--wrap=sleep {job.run_seconds}",
            ]
        )
        result = connections[job.tenant].run(shlex.join(argv))
        job.slurm_id = result.text.strip().split(";")[0]
        assert job.slurm_id.isdigit(), (result.text, result.error_text)
        job.submitted_at = timezone.now()

    def read() -> None:
        """One squeue of every submitted job not yet started: first estimates and starts."""
        waiting = {j.slurm_id: j for j in jobs if j.slurm_id and j.started is None}
        if not waiting:
            return
        now = timezone.now()
        for row in reader.queue(list(waiting)):
            job = waiting.get(row.job_id)
            if job is None:
                continue
            running = row.state not in ("PENDING", "CONFIGURING")
            if job.squeue_first is None and row.start_time is not None:
                job.squeue_first, job.squeue_read_at = row.start_time, now
                job.pending_estimate = not running
            if running and row.start_time is not None:
                job.started = row.start_time

    def history() -> list[Sample]:
        """What the portal would have learned by now: started jobs' first pending estimates."""
        return [
            Sample(
                predicted=(j.squeue_first - j.squeue_read_at).total_seconds(),
                actual=max(0.0, (j.started - j.squeue_read_at).total_seconds()),
            )
            for j in jobs
            if j.started and j.pending_estimate and j.squeue_first and j.squeue_read_at
        ]

    print(
        f"{FILL} jobs to make a queue, then {MEASURED} new ones about every {ARRIVAL:.0f} s "
        f"on the sandbox's {cluster.name} (seed {SEED})"
    )
    try:
        for job in jobs[:FILL]:
            submit(job)
        next_read = time.monotonic()
        for job in jobs[FILL:]:
            pause_until = time.monotonic() + rng.expovariate(1 / ARRIVAL)
            while time.monotonic() < pause_until:
                if time.monotonic() >= next_read:
                    read()
                    next_read = time.monotonic() + READ_EVERY
                time.sleep(0.2)
            factor_history = history_of(history())
            (answer,) = slurms[job.tenant].test_starts([job.options])
            job.asked_at = timezone.now()
            if answer.start is not None:
                predicted = max(0.0, (answer.start - job.asked_at).total_seconds())
                job.ours = job.asked_at + timedelta(seconds=factor_history.correct(predicted))
                job.corrected = factor_history.factor is not None
            submit(job)
        deadline = time.monotonic() + (300 if QUICK else 1800)
        while any(j.started is None for j in jobs) and time.monotonic() < deadline:
            read()
            time.sleep(READ_EVERY)
    finally:
        argv = tools.wrap(["scancel", f"--name={name}"])
        for connection in connections.values():
            connection.run(shlex.join(argv))
            connection.close()

    measured = [j for j in jobs if j.measured and j.started and j.submitted_at]
    final = history_of(history())
    print(
        f"{len(measured)} of {MEASURED} measured jobs started; "
        f"the correction learned {final.factor or 1:.2f} x Slurm's wait "
        f"from {len(final.samples)} estimates"
    )
    for title, group in (
        ("all measured jobs", measured),
        (
            "those that waited (squeue gave a pending estimate)",
            [j for j in measured if j.pending_estimate],
        ),
        ("those predicted once the history could correct", [j for j in measured if j.corrected]),
    ):
        print(f"\n{title}: {len(group)}")
        _table(
            {
                "ours (test-only, corrected)": [(j.ours, j.started) for j in group],
                "squeue --start alone": [(j.squeue_first, j.started) for j in group],
                'naive "now"': [(j.asked_at or j.submitted_at, j.started) for j in group],
            }
        )


def _table(rows: dict[str, list[tuple[datetime | None, datetime | None]]]) -> None:
    from jobs.queue.waits import percentile

    print(f"{'predictor':30} | {'jobs':>4} | {'median error':>12} | {'p90 error':>9}")
    print(f"{'-' * 30}-|-{'-' * 4}-|-{'-' * 12}-|-{'-' * 9}")
    for title, pairs in rows.items():
        errors = sorted(abs((s - p).total_seconds()) for p, s in pairs if p and s)
        if not errors:
            print(f"{title:30} | {0:>4} | {'-':>12} | {'-':>9}")
            continue
        median, p90 = percentile(errors, 0.5), percentile(errors, 0.9)
        print(f"{title:30} | {len(errors):>4} | {median:>10.0f} s | {p90:>7.0f} s")


if __name__ == "__main__":
    main()
