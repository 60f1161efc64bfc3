"""Hang detection on the 2-node DDP example: one rank is stopped (SIGSTOP) mid-run, each time.

Prints, per repetition, the delay from the last step any rank made to the portal's
hang flag, whether the rank and node it named are the stopped ones, and how many
live ranks' stacks came back; beside the peer figure, PyTorch's NCCL watchdog,
which aborts a stuck collective after its default timeout of 600 s
(ProcessGroupNCCL's `timeout`, torch.distributed.init_process_group docs), and names
no culprit. The job asks for a 15 s floor (3 x its step interval is less), so the
delay is about the floor plus a poll or two.

Needs root and the sandbox cluster (`manage.py sandbox up`) with PyTorch in its job
environment; uses its own database `portal_bench` and Redis database 15, and a real
Celery worker with beat. Run: `.venv/bin/python bench/hang.py [--repeat 5] [--quick]`.
The 2-node job lands on any two of the sandbox's three nodes; rank 1 is on the second.
"""

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import (  # noqa: E402
    QUICK,
    bench_cluster,
    delete_jobs_without_charges,
    ensure_database,
    jobs_cancel_on_slurm,
)

from devtools.servers import celery_worker, purge_queue, running, server_env  # noqa: E402

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

EXAMPLE = ROOT / "examples" / "ddp_train.py"
NCCL_WATCHDOG_SECONDS = 600  # torch.distributed's default timeout for NCCL
FLOOR = 15  # seconds: the job's hang_floor_seconds
FLAG_TIMEOUT = 180.0
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _rank_process(attempt_uuid: str, rank: int) -> tuple[int, str] | None:
    """(pid, node) of a training process of the attempt on this machine (the sandbox)."""
    marker = f"PORTAL_ATTEMPT={attempt_uuid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            items = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker in items and f"RANK={rank}".encode() in items:
            env = dict(i.decode(errors="replace").partition("=")[::2] for i in items if b"=" in i)
            found.append((int(entry.name), env.get("SLURMD_NODENAME", "")))
    return min(found) if found else None


def _wait(predicate: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.5)
    return False


def main() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="SIGSTOP runs (default 5)")
    parser.add_argument("--quick", action="store_true", help="one run (the suite's)")
    args = parser.parse_args()
    repeat = 1 if QUICK else max(args.repeat, 1)
    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from clusters.models import ClusterAccount
    from clusters.selectors import account_endpoint
    from clusters.ssh import Connection
    from jobs.enums import Template
    from jobs.models import Attempt, Job
    from jobs.services import job_cancel, job_submit
    from jobs.specs import JobSpec
    from monitoring.models import AttemptProgress
    from projects.models import Membership, Project, Quota

    call_command("migrate", verbosity=0)
    cluster = bench_cluster()
    user = User.objects.get(username="alice")
    project, _ = Project.objects.get_or_create(slug="bench-hang", defaults={"name": "Hang bench"})
    Quota.objects.get_or_create(
        project=project,
        defaults={"gpu_hours_per_period": Decimal("1000"), "max_wall_time": timedelta(hours=1)},
    )
    Membership.objects.get_or_create(
        user=user, project=project, defaults={"role": Membership.Role.MEMBER}
    )
    account = ClusterAccount.objects.get(cluster=cluster, username="alice")
    with Connection(account_endpoint(account=account)) as alice:
        if alice.run("command -v torchrun").exit_status != 0:
            sys.exit("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
        alice.run("mkdir -p -m 700 portal-examples")
        alice.upload("portal-examples/ddp_train.py", EXAMPLE.read_bytes(), mode=0o600)
    spec = JobSpec(
        name="hang-bench",
        template=Template.TORCHRUN,
        command="portal-examples/ddp_train.py --steps 2000 --checkpoint-every 50 --sleep 0.3",
        nodes=2,
        gpus_per_node=1,
        cpus_per_task=1,
        memory_mb=None,
        time_limit=timedelta(minutes=10),
        partition="gpu",
        hang_floor_seconds=FLOOR,
        hang_multiple=3.0,
    )
    env = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
    )
    purge_queue(env)
    workdir = Path(tempfile.mkdtemp(prefix="bench-hang-"))
    worker = celery_worker(env, workdir, name=f"bench-hang-{os.getpid()}")
    rows: list[tuple[str, ...]] = []
    delays: list[float] = []
    jobs: list[Job] = []
    try:
        with running(worker):
            for run in range(1, repeat + 1):
                job = job_submit(user=user, project=project, cluster=cluster, spec=spec)
                jobs.append(job)
                attempt = Attempt.objects.get(job=job, number=1)

                def stepping(attempt: Attempt = attempt) -> bool:
                    row = AttemptProgress.objects.filter(attempt=attempt).first()
                    steps = [r.get("step") or 0 for r in (row.ranks if row else {}).values()]
                    return len(steps) == 2 and min(steps) >= 10

                target = _rank_process(str(attempt.uuid), 1) if _wait(stepping, 180) else None
                if target is None:
                    rows.append((str(run), "-", "-", "-", "no rank 1 to stop", "-", "-"))
                    continue
                pid, node = target
                os.kill(pid, signal.SIGSTOP)
                try:
                    flagged = _wait(
                        lambda a=attempt: AttemptProgress.objects.filter(
                            attempt=a, verdict="hang"
                        ).exists(),
                        FLAG_TIMEOUT,
                    )
                    _wait(
                        lambda a=attempt: "0" in AttemptProgress.objects.get(attempt=a).stacks, 30
                    )
                finally:
                    os.kill(pid, signal.SIGCONT)
                    job_cancel(job=job, user=user)
                progress = AttemptProgress.objects.get(attempt=attempt)
                attempt.refresh_from_db()
                nodes = attempt.node_list or "-"
                if not flagged or progress.flagged_at is None:
                    missed = f"not flagged in {FLAG_TIMEOUT:.0f} s"
                    rows.append((str(run), nodes, "-", "-", missed, "-", "-"))
                    continue
                last = max(r["step_at"] for r in progress.ranks.values() if r.get("step_at"))
                delay = progress.flagged_at.timestamp() - last
                delays.append(delay)
                named = f"rank {progress.culprit_rank} on {progress.culprit_node}"
                right = progress.culprit_rank == 1 and progress.culprit_node == node
                rows.append(
                    (
                        str(run),
                        nodes,
                        f"{delay:.1f}",
                        f"{progress.threshold_seconds or 0:.0f}",
                        named,
                        "yes" if right else f"NO (stopped rank 1 on {node})",
                        f"{len(progress.stacks)}/1",
                    )
                )
                _wait(
                    lambda j=job: (
                        not Attempt.objects.filter(job=j).exclude(state__in=FINAL).exists()
                    ),
                    60,
                )
    finally:
        jobs_cancel_on_slurm(jobs=jobs, user=user)
        delete_jobs_without_charges(pk__in=[job.pk for job in jobs])

    header = ("run", "nodes", "delay s", "limit s", "named", "culprit right", "live stacks")
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print("-+-".join("-" * w for w in widths))
    for row in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    median = f"{statistics.median(delays):.1f} s" if delays else "-"
    print(
        f"median delay from the last step to the flag: {median}; the NCCL watchdog's default: "
        f"{NCCL_WATCHDOG_SECONDS} s, naming no rank; POLL_INTERVAL {settings.POLL_INTERVAL} s"
    )
    print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
