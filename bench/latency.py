"""Log latency on the job WebSocket: from a line printed on the cluster to a browser having it.

A command job prints `MARK <seq> <unix time>` every 0.2 s; WebSocket clients parse
those lines out of the deltas and measure receive time minus printed time (the
cluster and the portal share this machine's clock).  Measured with 1 client and
with 100 clients on one job, each phase on its own job, against a real Celery
worker with beat and a real daphne at default settings (POLL_INTERVAL 1 s).

Needs root and the sandbox cluster (`manage.py sandbox up`); uses its own database
`portal_bench` on the local PostgreSQL and Redis database 15 (so that a test run
does not share its queue).  Run: `.venv/bin/python bench/latency.py [--quick]`.
"""

import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from types import FrameType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import (  # noqa: E402
    MARK,
    QUICK,
    bench_cluster,
    bench_project,
    delete_jobs_without_charges,
    ensure_database,
    jobs_cancel_on_slurm,
    session_headers,
)

from devtools.servers import (  # noqa: E402
    Daphne,
    Server,
    celery_worker,
    purge_queue,
    running,
    server_env,
)

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

LINES = 10 if QUICK else 150  # one every PERIOD seconds: 30 s of output per job
PERIOD = 0.2
START_DELAY = 3.0  # the job waits this long before its first line, so every client is in
CLIENTS = (5,) if QUICK else (1, 100)  # quick: one phase, enough to show it runs
GOAL_P95 = 1.5
PHASE_TIMEOUT = 75.0  # from submission to the last line, per phase
QUIET_AFTER_FINAL = 3.0  # a client stops this long after it saw a final state
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY"}
PRINTER = f"""sleep {START_DELAY}
python3 -c '
import time
start = time.time()
for seq in range({LINES}):
    print("MARK %d %.6f" % (seq, time.time()), flush=True)
    time.sleep(max(0.0, start + (seq + 1) * {PERIOD} - time.time()))
'"""


def _services(workdir: Path) -> tuple[Server, Daphne]:
    """The Celery worker with embedded beat and daphne, on `portal_bench`, at default settings."""
    env = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
        # Every client is the same user: lift the per-user socket cap above the largest phase.
        extra={"WEBSOCKETS_PER_USER": str(max(CLIENTS) + 10)},
    )
    purge_queue(env)
    worker = celery_worker(env, workdir, name=f"bench-latency-{os.getpid()}")
    return worker, Daphne(env, workdir)


@dataclass
class Client:
    """What one WebSocket client saw."""

    latencies: list[float] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    deltas: int = 0
    without_text: int = 0  # log deltas over the inline limit: offsets only, text over REST
    gaps: int = 0  # log deltas not starting where the previous one ended (a lost delta)
    late: bool = False  # the first hello already counted stdout bytes
    drops: int = 0  # connections the server closed under the client
    close_codes: set[int] = field(default_factory=set)
    error: str | None = None


async def _follow(url: str, headers: dict[str, str], origin: str, client: Client) -> None:
    """Read deltas until the last line, a final state gone quiet, or the phase timeout.

    A connection the server drops is reopened at once, as the page does (after 1 s);
    the lines printed meanwhile are missing for this client (the page reads them over REST).
    """
    from websockets.asyncio.client import connect
    from websockets.exceptions import ConnectionClosed
    from websockets.typing import Origin

    loop = asyncio.get_running_loop()
    deadline = loop.time() + PHASE_TIMEOUT
    final_at: float | None = None

    def done() -> bool:
        quiet = final_at is not None and loop.time() - final_at > QUIET_AFTER_FINAL
        return LINES - 1 in client.seen or quiet or loop.time() > deadline

    try:
        while not done():
            try:
                async with connect(
                    url, origin=Origin(origin), additional_headers=headers, open_timeout=20
                ) as ws:
                    hello = json.loads(await asyncio.wait_for(ws.recv(), 20))
                    if hello.get("event") != "hello":
                        raise RuntimeError(f"expected a hello, got {hello!r:.200}")
                    sizes = [a.get("log_sizes", {}) for a in hello.get("attempts", [])]
                    expected = sum(s.get("stdout.log", 0) for s in sizes)
                    client.late = client.late or (expected > 0 and not client.drops)
                    carry = ""
                    while not done():
                        try:
                            raw = await asyncio.wait_for(ws.recv(), 0.5)
                        except TimeoutError:
                            continue
                        received = time.time()
                        message = json.loads(raw)
                        if message.get("event") != "delta":
                            continue
                        client.deltas += 1
                        if message.get("state") in FINAL and final_at is None:
                            final_at = loop.time()
                        log = message.get("log")
                        if not log or log.get("file") != "stdout.log":
                            continue
                        if log["offset"] != expected:
                            client.gaps += 1
                            carry = ""
                        expected = log["end"]
                        text = log.get("text")
                        if text is None:
                            client.without_text += 1
                            carry = ""
                            continue
                        *lines, carry = (carry + text).split("\n")
                        for line in lines:
                            match = MARK.match(line.strip())
                            if match and int(match[1]) not in client.seen:
                                client.seen.add(int(match[1]))
                                client.latencies.append(received - float(match[2]))
            except ConnectionClosed as exc:
                client.drops += 1
                client.close_codes.add(exc.rcvd.code if exc.rcvd else 1006)
                await asyncio.sleep(0.1)
    except Exception as exc:  # one failing client is reported, not fatal to the others
        client.error = f"{type(exc).__name__}: {exc}"


async def _watch(url: str, headers: dict[str, str], origin: str, count: int) -> list[Client]:
    clients = [Client() for _ in range(count)]
    await asyncio.gather(*(_follow(url, headers, origin, c) for c in clients))
    return clients


def _quantile(values: list[float], q: float) -> float:
    if len(values) < 2:
        return values[0] if values else float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _column(clients: list[Client]) -> dict[str, str]:
    latencies = [x for c in clients for x in c.latencies]
    complete = sum(len(c.seen) == LINES for c in clients)
    return {
        "latency p50 (s)": f"{_quantile(latencies, 0.50):.3f}",
        "latency p95 (s)": f"{_quantile(latencies, 0.95):.3f}",
        "latency max (s)": f"{max(latencies, default=float('nan')):.3f}",
        "lines received (count)": str(len(latencies)),
        "clients that saw every line": f"{complete}/{len(clients)}",
        "deltas per client (mean)": f"{statistics.mean(c.deltas for c in clients):.1f}",
        "deltas without text (too big)": str(sum(c.without_text for c in clients)),
        "lost deltas (offset gaps)": str(sum(c.gaps for c in clients)),
        "clients connected late": str(sum(c.late for c in clients)),
        "server drops (reconnected)": str(sum(c.drops for c in clients)),
        "client errors": str(sum(c.error is not None for c in clients)),
    }


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    # Ctrl-C and kill both unwind through the clean-up, even where a shell
    # started the bench in the background with SIGINT ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    ensure_database()
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from jobs.enums import Template
    from jobs.models import Job
    from jobs.services import job_submit
    from jobs.specs import JobSpec

    call_command("migrate", verbosity=0)
    cluster = bench_cluster()
    user = User.objects.get(username="alice")
    project = bench_project(user=user, slug="bench-latency", name="Latency bench")
    session, headers = session_headers(user)
    spec = JobSpec(
        name="latency-bench",
        template=Template.COMMAND,
        command=PRINTER,
        nodes=1,
        gpus_per_node=1,
        cpus_per_task=1,
        memory_mb=None,
        time_limit=timedelta(minutes=5),
        partition="gpu",
    )

    jobs: list[Job] = []
    columns: dict[int, dict[str, str]] = {}
    workdir = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    worker, daphne = _services(workdir)
    started = time.monotonic()
    try:
        with running(worker, daphne):
            try:
                for count in CLIENTS:
                    job = job_submit(user=user, project=project, cluster=cluster, spec=spec)
                    jobs.append(job)
                    url = f"ws://127.0.0.1:{daphne.port}/ws/jobs/{job.pk}/"
                    clients = asyncio.run(_watch(url, headers, daphne.url, count))
                    columns[count] = _column(clients)
                    errors = sorted({c.error for c in clients if c.error})
                    for error in errors[:3]:
                        print(f"{count} clients: {error}", file=sys.stderr)
                    codes = sorted({code for c in clients for code in c.close_codes})
                    if codes:
                        print(f"{count} clients: server closed with codes {codes}", file=sys.stderr)
            finally:
                jobs_cancel_on_slurm(jobs=jobs, user=user)
    finally:
        # Jobs the ledger charged stay (its rows are immutable), as in a real portal.
        delete_jobs_without_charges(pk__in=[job.pk for job in jobs])
        session.delete()

    names = [f"{n} client" + ("s" if n > 1 else "") for n in CLIENTS]
    width = max(len(row) for row in columns[CLIENTS[0]])
    print(f"{LINES} lines every {PERIOD} s per job; POLL_INTERVAL {settings.POLL_INTERVAL} s")
    print(f"{'':<{width}} | " + " | ".join(f"{name:>11}" for name in names))
    print("-" * (width + 14 * len(names) + 1))
    for row in columns[CLIENTS[0]]:
        print(f"{row:<{width}} | " + " | ".join(f"{columns[n][row]:>11}" for n in CLIENTS))
    worst = max(float(columns[n]["latency p95 (s)"]) for n in CLIENTS)
    verdict = "met" if worst < GOAL_P95 else "MISSED"
    print(f"goal p95 < {GOAL_P95} s: {verdict}; took {time.monotonic() - started:.0f} s")
    print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
