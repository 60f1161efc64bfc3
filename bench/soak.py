"""Soak: many cheap jobs at once on the sandbox, polled by a real worker with beat.

Each job (one CPU, no GPU) prints a training line a second (`step N, loss=X,
samples_per_sec=Y`: two points) for the soak's length, sleeping without a fork
between lines (`read -t`), as a thousand real trainers would print; one more job, the
watched one, prints `MARK <seq> <time>` twice a second. The bench reads that job's
stored log from the database every 0.2 s: stored minus printed time is the log latency.
That job's page is open (a WebSocket to a real daphne, as a browser holds it): its
lines' latency on the page is reported too, and the polls read a job with a page open
between the slices of a long poll (jobs.poll.cycle.FILES_SLICE).
It samples the poll figures (`jobs.poll.health`) of both parts of every poll, the
worker's memory (its process group's RSS) at the start and the end, and at the end
compares every job's log on the cluster with what was stored (lost bytes).

The sandbox's three nodes declare enough CPUs for every job while it runs
(the state directory's `node-cpus`, slurmd's config_overrides; restored at the end). Needs root and
the sandbox. Run: `.venv/bin/python bench/soak.py [--quick] [--jobs N] [--minutes M]`
(default 1,000 jobs for 10 minutes; quick: 4 jobs for 20 s on the sandbox as it is).
"""

import argparse
import os
import re
import shlex
import signal
import statistics
import sys
import tempfile
import threading
import time
from contextlib import ExitStack
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
    hold_page,
    jobs_cancel_on_slurm,
    session_headers,
)

from devtools.sandbox_turns import sandbox_turn  # noqa: E402
from devtools.servers import (  # noqa: E402
    Daphne,
    Server,
    celery_worker,
    purge_queue,
    running,
    server_env,
)

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

GOAL_LATENCY_P95 = 1.5
MARK = re.compile(rb"^MARK (\d+) (\d+\.\d+)$", re.M)
# Sleeps without a process per line: a read that times out on a pipe nobody writes.
TRAINER = """exec {{fd}}<> <(:)
end=$((SECONDS + {seconds})); i=0
while [ $SECONDS -lt $end ]; do
  i=$((i + 1))
  echo "step $i, loss=$((100000 / (i + 9)))e-5, samples_per_sec=$((900 + i % 200))"
  read -t 1 -u $fd
done
exit 0  # not the last read's timeout"""
WATCHED = """exec {{fd}}<> <(:)
end=$((SECONDS + {seconds})); seq=0
while [ $SECONDS -lt $end ]; do
  echo "MARK $seq $EPOCHREALTIME"; seq=$((seq + 1))
  read -t 0.5 -u $fd
done
exit 0"""


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jobs", type=int, default=4 if QUICK else 1000)
    parser.add_argument("--minutes", type=float, default=20 / 60 if QUICK else 10.0)
    return parser.parse_args()


def _quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _group_rss_mb(server: Server) -> float:
    """Resident memory of the server's process group (the worker, its pool and beat)."""
    if server.proc is None:
        return 0.0
    group = os.getpgid(server.proc.pid)
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            status = (entry / "status").read_text()
        except (OSError, ProcessLookupError):
            continue
        found = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        total += int(found[1]) if found else 0
    return total / 1024


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    args = _arguments()
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    ensure_database()
    seconds = int(args.minutes * 60)
    cpus = -(-(args.jobs + 1) // 3) + 2  # the jobs over three nodes, and room to spare
    reconfigure = not QUICK and cpus > (os.cpu_count() or 1)
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from clusters.sandbox.config import Paths

    call_command("migrate", verbosity=0)
    with ExitStack() as turn:
        if reconfigure:  # the nodes restart: nobody else's jobs may be on the sandbox
            turn.enter_context(sandbox_turn(settings.SANDBOX_STATE_DIR, exclusive=True))
            declared = Paths.of(settings.SANDBOX_STATE_DIR).node_cpus
            declared.write_text(f"{cpus}\n")  # kept by any `up` until removed
            turn.callback(declared.unlink, missing_ok=True)
        _soak(args, seconds, reconfigure)


def _soak(args: argparse.Namespace, seconds: int, reconfigure: bool) -> None:
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection

    from clusters import sandbox
    from clusters.models import ClusterAccount
    from clusters.sandbox.config import Paths
    from clusters.selectors import account_endpoint
    from clusters.ssh import Connection
    from jobs.enums import FINAL_STATES, State, Template
    from jobs.models import Attempt, Job
    from jobs.poll.cycle import PARTS
    from jobs.poll.health import poll_figures
    from jobs.services import job_submit
    from jobs.specs import JobSpec
    from monitoring.ingest.figures import POINTS
    from monitoring.logs.store import log_read
    from monitoring.models import LogFile
    from portal_lib.health import health_read
    from projects.models import Membership, Project, Quota

    cluster = bench_cluster()
    user = User.objects.get(username="alice")
    project, _ = Project.objects.get_or_create(slug="bench-soak", defaults={"name": "Soak"})
    Quota.objects.get_or_create(
        project=project,
        defaults={"gpu_hours_per_period": Decimal("1000"), "max_wall_time": timedelta(hours=2)},
    )
    Membership.objects.get_or_create(
        user=user, project=project, defaults={"role": Membership.Role.MEMBER}
    )
    delete_jobs_without_charges(project=project)

    def spec(name: str, command: str) -> JobSpec:
        return JobSpec(
            name=name,
            template=Template.COMMAND,
            command=command,
            nodes=1,
            gpus_per_node=0,
            cpus_per_task=1,
            memory_mb=None,
            time_limit=timedelta(seconds=seconds + 600),
            partition="gpu",
        )

    env = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
    )
    purge_queue(env)
    workdir = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    worker = celery_worker(env, workdir, name=f"bench-soak-{os.getpid()}")
    worker.ready = lambda: "ready." in worker.log_tail(400)  # memory measured from here
    daphne = Daphne(env, workdir)
    session, headers = session_headers(user)
    arrived: dict[int, float] = {}  # on the open page: line -> latency
    page: threading.Thread | None = None
    jobs: list[Job] = []
    cycles: dict[str, list[float]] = {part: [] for part in PARTS}
    latencies: list[float] = []
    steady: list[float] = []  # once every job runs: no submissions competing with polls
    peak_running = 0
    stop = threading.Event()
    submitter: threading.Thread | None = None
    try:
        with running(worker, daphne):
            rss_start = _group_rss_mb(worker)
            points_start = health_read().get(POINTS, 0.0)
            submit_start = time.monotonic()
            watched = job_submit(
                user=user,
                project=project,
                cluster=cluster,
                spec=spec("soak-watched", WATCHED.format(seconds=seconds)),
            )
            jobs.append(watched)
            page = threading.Thread(
                target=hold_page,
                args=(
                    f"ws://127.0.0.1:{daphne.port}/ws/jobs/{watched.pk}/",
                    headers,
                    daphne.url,
                    stop,
                    arrived,
                ),
                name="soak-page",
            )
            page.start()
            trainer = TRAINER.format(seconds=seconds)
            failed: list[BaseException] = []

            def submit_all() -> None:
                # Beside the measurement, which reads the watched job's log from the start:
                # a line printed while the rest are submitted counts at its real latency.
                try:
                    for index in range(args.jobs):
                        if stop.is_set():
                            return
                        jobs.append(
                            job_submit(
                                user=user,
                                project=project,
                                cluster=cluster,
                                spec=spec(f"soak-{index}", trainer),
                            )
                        )
                except BaseException as exc:  # re-raised below, in the main thread
                    failed.append(exc)
                finally:
                    connection.close()

            submitter = threading.Thread(target=submit_all, name="soak-submit")
            submitter.start()
            # This run's jobs: the bench project's, from the watched one on.
            attempts = Attempt.objects.filter(job__project=project, job_id__gte=watched.pk)
            watched_attempt = Attempt.objects.get(job=watched)
            offset, carry, seen = 0, b"", set()
            last_end = {part: 0.0 for part in PARTS}
            all_running_at = None
            deadline = time.monotonic() + seconds + 900
            while time.monotonic() < deadline:
                time.sleep(0.2)
                figures = health_read()
                for part in PARTS:
                    poll = poll_figures(figures, cluster_id=cluster.pk, part=part)
                    if poll.last_end and poll.last_end != last_end[part] and poll.last_seconds:
                        last_end[part] = poll.last_end
                        cycles[part].append(poll.last_seconds)
                size = next(
                    iter(
                        LogFile.objects.filter(
                            attempt=watched_attempt, name="stdout.log"
                        ).values_list("size", flat=True)
                    ),
                    0,
                )
                if size > offset:
                    now = time.time()
                    data = log_read(
                        attempt_id=watched_attempt.pk,
                        file="stdout.log",
                        offset=offset,
                        limit=size - offset,
                    ).data
                    offset += len(data)
                    *lines, carry = (carry + data).split(b"\n")
                    for match in MARK.finditer(b"\n".join(lines)):
                        if int(match[1]) not in seen:
                            seen.add(int(match[1]))
                            latencies.append(now - float(match[2]))
                            if all_running_at is not None:
                                steady.append(now - float(match[2]))
                running_now = attempts.filter(state=State.RUNNING).count()
                peak_running = max(peak_running, running_now)
                submitting = submitter.is_alive()
                if failed:
                    raise failed[0]
                if all_running_at is None and not submitting and running_now == len(jobs):
                    all_running_at = time.monotonic() - submit_start
                if (
                    not submitting
                    and not attempts.exclude(state__in=FINAL_STATES).exists()
                    and not attempts.filter(files_complete=False).exists()
                ):
                    break
            rss_end = _group_rss_mb(worker)
            ended = attempts.filter(state=State.COMPLETED).count()
            remote: dict[str, int] = {}
            account = ClusterAccount.objects.get(cluster=cluster, username="alice")
            paths = [a.run_dir + "/stdout.log" for a in attempts if a.run_dir]
            with Connection(account_endpoint(account=account)) as alice:
                for start in range(0, len(paths), 200):
                    batch = " ".join(shlex.quote(p) for p in paths[start : start + 200])
                    out = alice.run(f"stat -c '%s %n' {batch} 2>/dev/null").stdout.decode()
                    for line in out.splitlines():
                        size_text, _, name = line.partition(" ")
                        remote[name] = int(size_text)
            stored = {
                f"{run_dir}/stdout.log": size
                for run_dir, size in LogFile.objects.filter(
                    attempt__in=attempts, name="stdout.log"
                ).values_list("attempt__run_dir", "size")
            }
            lost = sum(max(size - stored.get(name, 0), 0) for name, size in remote.items())
            points = health_read().get(POINTS, 0.0) - points_start
    finally:
        stop.set()
        if submitter is not None:
            submitter.join()
        if page is not None:
            page.join()
        session.delete()
        jobs_cancel_on_slurm(jobs=jobs, user=user)
        if reconfigure:
            Paths.of(settings.SANDBOX_STATE_DIR).node_cpus.unlink(missing_ok=True)
            sandbox.up(settings.SANDBOX_STATE_DIR)  # the nodes as the suite knows them
    took = "never" if all_running_at is None else f"{all_running_at:.1f}"
    rows = [
        ("jobs running at once (peak)", str(peak_running)),
        ("every job running, after submitting (s)", took),
        *(
            (
                f"poll cycle, {part} p50 / p95 (s)",
                f"{_quantile(cycles[part], 0.5):.3f} / "
                f"{_quantile(cycles[part], 0.95):.3f} ({len(cycles[part])} sampled)",
            )
            for part in PARTS
        ),
        (
            f"watched log latency p50 / p95 (s), goal p95 {GOAL_LATENCY_P95}",
            f"{_quantile(latencies, 0.5):.3f} / {_quantile(latencies, 0.95):.3f} "
            f"({len(latencies)} lines)",
        ),
        (
            "the same on its open page (WebSocket), p50 / p95 (s)",
            f"{_quantile(list(arrived.values()), 0.5):.3f} / "
            f"{_quantile(list(arrived.values()), 0.95):.3f} ({len(arrived)} lines)",
        ),
        (
            "the same once every job runs, p50 / p95 (s)",
            f"{_quantile(steady, 0.5):.3f} / {_quantile(steady, 0.95):.3f} ({len(steady)} lines)",
        ),
        ("worker memory start / end (MB)", f"{rss_start:.0f} / {rss_end:.0f}"),
        ("jobs completed", f"{ended}/{len(jobs)}"),
        ("log bytes on the cluster / lost (goal 0)", f"{sum(remote.values())} / {lost}"),
        ("metric points stored", f"{points:.0f}"),
    ]
    print(f"soak: {args.jobs} jobs and a watched one, {seconds} s of output each\n")
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if lost or ended != len(jobs) or not latencies:
        sys.exit(1)


if __name__ == "__main__":
    main()
