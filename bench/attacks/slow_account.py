"""A slow account (issue 33): the second tenant's log latency through the real files poll,
beside a quick account and then beside one whose login's start-up (its ~/.bashrc) takes
25 s before every command, in one run.

The poll is the real one (`jobs.poll.cycle`: the accounts read in parallel, their budget,
the notes that leave an account out, the agent, the ingest); each account's login runs
here, `sh -c` in a home of its own, its start-up first. A writer prints
`MARK <seq> <unix time>` every 0.2 s into alice's stdout; a loop stands in for the beat,
polling once a second; latency is from a MARK line written to it being stored.
"""

import contextlib
import datetime
import os
import re
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchdb import QUICK

SLOW_STARTUP = "sleep 25; "  # the slow account's ~/.bashrc, before every command
SECONDS = 12.0 if QUICK else 60.0  # per phase
POLL_INTERVAL = 1.0
PERIOD = 0.2
MARK = re.compile(rb"^MARK (\d+) (\d+\.\d+)$", re.M)


class _Login:
    """An account's login on this machine: its start-up, then the command, with `sh -c` in
    its home; ended at its deadline or output cap as the SSH gateway ends a command."""

    def __init__(self, home: Path) -> None:
        from clusters.ssh import Endpoint

        self.home = home
        self.startup = ""
        self.endpoint = Endpoint("bench", "localhost", 22, "", home.name, "")

    def run(
        self, command: str, *, stdin: bytes = b"", timeout: float = 30.0, max_output: int = 1 << 26
    ) -> Any:
        from clusters.ssh import CommandResult, CommandTimedOut, OutputCapExceeded

        with subprocess.Popen(
            ["sh", "-c", self.startup + command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, cwd=self.home, start_new_session=True,
        ) as proc:  # fmt: skip
            try:
                out, err = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise CommandTimedOut("past its deadline", timeout=timeout) from None
        if len(out) + len(err) > max_output:
            raise OutputCapExceeded("past its cap", cap=max_output)
        return CommandResult(proc.returncode, out, err)


class _Logins:
    """Stands in for the SSH pool: each account's session is its login on this machine."""

    def __init__(self, root: Path, names: tuple[str, ...]) -> None:
        self.logins = {name: _Login(root / name) for name in names}
        for login in self.logins.values():
            login.home.mkdir(parents=True)

    @contextlib.contextmanager
    def session(self, endpoint: Any) -> Iterator[_Login]:
        yield self.logins[endpoint.username]


def slow_account_case() -> None:
    with tempfile.TemporaryDirectory() as root:
        rows = _slow_account(Path(root))
    print()
    print(
        f"alice's log-delta latency beside carol, {SECONDS:.0f} s each, "
        "through the files poll (the agent in local logins), poll every 1 s"
    )
    header = ("carol's start-up", "polls", "left out", "deltas", "p50 s", "p95 s", "max s")
    print(" | ".join(f"{h:>18}" if i == 0 else f"{h:>8}" for i, h in enumerate(header)))
    print("-" * 90)
    for row in rows:
        print(
            f"{row['startup']:>18} | {row['polls']:>8} | {row['left_out']:>8} | "
            f"{row['deltas']:>8} | {row['p50']:>8.3f} | {row['p95']:>8.3f} | {row['max']:>8.3f}"
        )
    why = rows[-1]["why"] or "-"
    print(f"carol's jobs' pages: monitoring of this account is delayed: {why}")


def _slow_account(root: Path) -> list[dict[str, Any]]:
    from django.contrib.auth.models import User

    from clusters.models import Cluster, ClusterAccount
    from devtools.keys import new_key_pair
    from jobs.enums import State
    from jobs.models import Attempt, Job
    from jobs.poll import backoff
    from jobs.poll import cycle as polling
    from projects.models import Project

    logins = _Logins(root, ("alice", "carol"))
    polling.pool = logins  # type: ignore[assignment]
    cluster, _ = Cluster.objects.get_or_create(
        name="bench-accounts", defaults={"ssh_host": "login", "host_key": new_key_pair()[1]}
    )
    project, _ = Project.objects.get_or_create(slug="bench-hostile", defaults={"name": "Hostile"})
    attempts, accounts = {}, []
    for username in ("carol", "alice"):  # carol's first, as an account order may put her
        user, _ = User.objects.get_or_create(username=f"bench-{username}")
        account, _ = ClusterAccount.objects.get_or_create(
            cluster=cluster, user=user, defaults={"username": username, "private_key": "x"}
        )
        accounts.append(account.pk)
        job = Job.objects.create(
            project=project, user=user, cluster=cluster, name=username, command="x",
            time_limit=datetime.timedelta(hours=1), gpus_per_node=1,
        )  # fmt: skip
        attempts[username] = Attempt.objects.create(
            job=job, number=1, account=account, run_dir=str(logins.logins[username].home),
            state=State.RUNNING, node_list="n1", slurm_job_id=str(job.pk),
        )  # fmt: skip
    rows = []
    try:
        for startup in ("", SLOW_STARTUP):
            logins.logins["carol"].startup = startup
            rows.append(_phase(cluster.pk, attempts["alice"], startup, polling))
            delay = backoff.account_delay(account_id=accounts[0])
            rows[-1]["why"] = delay.why if delay else None
            backoff.delay_clear(accounts)
    finally:
        backoff.delay_clear(accounts)
        Attempt.objects.filter(pk__in=[a.pk for a in attempts.values()]).update(
            state=State.COMPLETED, files_complete=True
        )
    return rows


def _writer(path: Path, stop: threading.Event) -> None:
    seq = 0
    with path.open("ab") as out:
        while not stop.is_set():
            out.write(b"MARK %d %.6f\n" % (seq, time.time()))
            out.flush()
            seq += 1
            stop.wait(PERIOD)


def _phase(cluster_id: int, alice: Any, startup: str, polling: Any) -> dict[str, Any]:
    from monitoring.logs.store import log_read

    stop = threading.Event()
    writer = threading.Thread(target=_writer, args=(Path(alice.run_dir) / "stdout.log", stop))
    seen = log_read(attempt_id=alice.pk, file="stdout.log", offset=-1, limit=0).size
    writer.start()
    latencies: list[float] = []
    polls = left_out = 0
    started = time.monotonic()
    try:
        while time.monotonic() - started < SECONDS:
            beat = time.monotonic()
            result = polling.cluster_poll(cluster_id=cluster_id, parts=(polling.FILES,))
            polls += 1
            left_out += "carol" in result.delayed
            now = time.time()
            stored = log_read(attempt_id=alice.pk, file="stdout.log", offset=seen, limit=1 << 24)
            seen = stored.end
            latencies += [now - float(m[2]) for m in MARK.finditer(stored.data)]
            time.sleep(max(0.0, POLL_INTERVAL - (time.monotonic() - beat)))
    finally:
        stop.set()
        writer.join()
    latencies.sort()
    return {
        "startup": startup.strip("; ") or "(none)",
        "polls": polls,
        "left_out": left_out,
        "deltas": len(latencies),
        "p50": statistics.median(latencies) if latencies else float("nan"),
        "p95": latencies[int(0.95 * (len(latencies) - 1))] if latencies else float("nan"),
        "max": latencies[-1] if latencies else float("nan"),
    }
