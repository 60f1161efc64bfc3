"""A hostile tenant's output beside a second tenant's: the second one's log-delta latency.

Drives the poll's real ingest (`MonitoringWatcher`, the parser process, the
database writes) with real files on this machine rather than the sandbox: one
writer thread prints each adversarial line of issue 13 into the hostile job's
files, another prints `MARK <seq> <unix time>` every 0.2 s into the second
tenant's stdout; a loop stands in for the beat, reading every file's new bytes
once a second (hostile account first, as the poll's account order may put it)
and ingesting them. Latency is from a MARK line written to it being stored.
The agent's SSH round trip is not in these figures (bench/latency.py has it).

Then a slow account beside the second tenant, through the real files poll
(bench/attacks/slow_account.py).

Then hostile code archives uploaded to a real daphne, beside another client's login
page (bench/attacks/pax.py).

Uses its own database `portal_bench_hostile` on the local PostgreSQL.
Run: `.venv/bin/python bench/hostile.py [--quick]`.
"""

import json
import os
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench_hostile")

from attacks.pax import pax_case  # noqa: E402
from attacks.slow_account import slow_account_case  # noqa: E402
from benchdb import QUICK, ensure_database  # noqa: E402 - after the path is set

SECONDS = 2.0 if QUICK else 20.0  # per adversarial line
POLL_INTERVAL = 1.0
PERIOD = 0.2
GOAL_P95 = 1.5
MARK = re.compile(rb"^MARK (\d+) (\d+\.\d+)$", re.M)
ATTACKS: dict[str, tuple[str, bytes]] = {
    "step + 64k spaces": ("stdout.log", b"step" + b" " * 65536 + b"\n"),
    "200 x step + 4k spaces": ("stdout.log", (b"step" + b" " * 4000 + b"\n") * 200),
    "user pattern on 25/4000 a": ("stdout.log", b"a" * 25 + b"\n" + b"a" * 4000 + b"\n"),
    "jsonl, 1000 keys": (
        "metrics.jsonl",
        json.dumps({"step": 1, **{f"k{i}": 1.0 for i in range(1000)}}).encode() + b"\n",
    ),
}
EVIL_PATTERN = r"(?P<loss>(?:(?:a|a))*b)"


def _attempts(run_root: Path) -> tuple[Any, Any]:
    from django.contrib.auth.models import User

    from clusters.models import Cluster, ClusterAccount
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from projects.models import Project

    cluster = Cluster.objects.filter(name="bench-hostile").first() or Cluster.objects.create(
        name="bench-hostile", ssh_host="login", host_key=new_key_pair()[1]
    )
    project, _ = Project.objects.get_or_create(slug="bench-hostile", defaults={"name": "Hostile"})
    made = []
    for username, patterns in (("mallory", EVIL_PATTERN), ("bystander", "")):
        user, _ = User.objects.get_or_create(username=f"bench-{username}")
        account, _ = ClusterAccount.objects.get_or_create(
            cluster=cluster, user=user, defaults={"username": username, "private_key": "x"}
        )
        job = Job.objects.create(
            project=project, user=user, cluster=cluster, name=username, command="x",
            time_limit=__import__("datetime").timedelta(hours=1), metric_patterns=patterns,
            gpus_per_node=1,
        )  # fmt: skip
        run_dir = run_root / username
        run_dir.mkdir(parents=True)
        attempt = Attempt.objects.create(
            job=job, number=1, account=account, run_dir=str(run_dir), state=State.RUNNING,
            node_list="n1",
        )  # fmt: skip
        made.append(Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk))
    return made[0], made[1]


def _reply(attempt: Any) -> Any:
    """What the agent would bring: each followed file's bytes from the stored size on."""
    from clusters.agent import AgentReply, FileChunk
    from jobs.rundir import file_key
    from monitoring.ingest.watch import FOLLOWED
    from monitoring.models import LogFile

    sizes = dict(LogFile.objects.filter(attempt=attempt).values_list("name", "size"))
    files = {}
    for name in FOLLOWED:
        path = Path(attempt.run_dir) / name
        if not path.exists():
            continue
        offset = sizes.get(name, 0)
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read(1024 * 1024)
        files[file_key(attempt.uuid, name)] = FileChunk(
            offset=offset, data=data, size=path.stat().st_size, more=False, error=None, inode=1
        )
    return AgentReply(time=time.time(), files=files)


def _writer(path: Path, line: Callable[[int], bytes], period: float, stop: threading.Event) -> None:
    seq = 0
    with path.open("ab") as out:
        while not stop.is_set():
            out.write(line(seq))
            out.flush()
            seq += 1
            stop.wait(period)


def _phase(kind: str, hostile: Any, other: Any) -> dict[str, Any]:
    from monitoring.ingest.watch import MonitoringWatcher
    from monitoring.logs.store import log_read
    from monitoring.models import AttemptIngest

    name, line = ATTACKS[kind]
    stop = threading.Event()
    threads = [
        threading.Thread(
            target=_writer,
            args=(Path(hostile.run_dir) / name, lambda _: line, 0.5, stop),
        ),
        threading.Thread(
            target=_writer,
            args=(
                Path(other.run_dir) / "stdout.log",
                lambda seq: b"MARK %d %.6f\n" % (seq, time.time()),
                PERIOD,
                stop,
            ),
        ),
    ]
    start_offset = log_read(attempt_id=other.pk, file="stdout.log", offset=-1, limit=0).size
    for thread in threads:
        thread.start()
    latencies: list[float] = []
    seen = start_offset
    started = time.monotonic()
    while time.monotonic() - started < SECONDS:
        beat = time.monotonic()
        for attempt in (hostile, other):  # one agent call per account, hostile first
            watcher = MonitoringWatcher()
            watcher.requests([attempt])
            watcher.ingest([attempt], _reply(attempt))
        now = time.time()
        stored = log_read(attempt_id=other.pk, file="stdout.log", offset=seen, limit=1 << 24)
        seen = stored.end
        latencies += [now - float(m[2]) for m in MARK.finditer(stored.data)]
        time.sleep(max(0.0, POLL_INTERVAL - (time.monotonic() - beat)))
    stop.set()
    for thread in threads:
        thread.join()
    note = AttemptIngest.objects.get(attempt=hostile)
    latencies.sort()
    return {
        "kind": kind,
        "deltas": len(latencies),
        "p50": statistics.median(latencies),
        "p95": latencies[int(0.95 * (len(latencies) - 1))],
        "max": latencies[-1],
        "skipped": note.skipped_lines,
        "over": note.over_budget,
        "dropped": note.dropped_names,
    }


def main() -> None:
    ensure_database()
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    rows = []
    with tempfile.TemporaryDirectory() as root:
        for kind in ATTACKS:
            hostile, other = _attempts(Path(root) / kind.replace(" ", "_").replace("/", "_"))
            rows.append(_phase(kind, hostile, other))
    print(f"second tenant's log-delta latency, {SECONDS:.0f} s per attack, poll every 1 s")
    header = ("hostile line", "deltas", "p50 s", "p95 s", "max s", "skipped", "over", "dropped")
    print(" | ".join(f"{h:>26}" if i == 0 else f"{h:>8}" for i, h in enumerate(header)))
    print("-" * 100)
    for row in rows:
        print(
            f"{row['kind']:>26} | {row['deltas']:>8} | {row['p50']:>8.3f} | {row['p95']:>8.3f} | "
            f"{row['max']:>8.3f} | {row['skipped']:>8} | {row['over']:>8} | {row['dropped']:>8}"
        )
    worst = max(float(row["p95"]) for row in rows)
    print(f"worst p95 {worst:.3f} s (goal < {GOAL_P95} s)")
    slow_account_case()
    pax_case()


if __name__ == "__main__":
    main()
