"""What the portal's proxy adds to a JupyterLab session: one kernel execution's round trip.

A JupyterLab session (the `jupyter` template) runs on the sandbox. The same kernel is
driven two ways, alternating, over its WebSocket: through the portal (daphne and
Channels, the proxy's SSH tunnel on the owner's login) and through a direct SSH tunnel
(`ssh -L`, OpenSSH, as the owner would open one by hand, with the server's token). Each
round trip is an `execute_request` of `1+1` until its `execute_reply`; then one HTTP
GET of the server's `api/status` the same two ways.

Needs root and the sandbox cluster (its job python with JupyterLab); uses `portal_bench`
and Redis database 15. Run: `.venv/bin/python bench/session_proxy.py [--quick]`.
"""

import json
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchdb import (  # noqa: E402
    QUICK,
    bench_cluster,
    bench_project,
    delete_jobs_without_charges,
    ensure_database,
    jobs_cancel_on_slurm,
    session_headers,
)

from devtools.servers import Daphne, celery_worker, free_port, purge_queue, running, server_env  # noqa: E402

os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")

REPEATS = 20 if QUICK else 200
START_TIMEOUT = 300.0  # from submission to the server answering through the portal


def _execute(ws: Any, session: str) -> float:
    """One `1+1` on the kernel; seconds until its execute_reply."""
    msg_id = uuid.uuid4().hex
    message = {
        "header": {
            "msg_id": msg_id,
            "msg_type": "execute_request",
            "session": session,
            "username": "bench",
            "date": "",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": "1+1",
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
            "stop_on_error": True,
        },
        "channel": "shell",
        "buffers": [],
    }
    started = time.perf_counter()
    ws.send(json.dumps(message))
    while True:
        reply = json.loads(ws.recv(timeout=30))
        parent = reply.get("parent_header", {})
        if parent.get("msg_id") == msg_id and reply.get("msg_type") == "execute_reply":
            return time.perf_counter() - started


def _quantiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return statistics.median(values) * 1000, cuts[94] * 1000


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(1.0)


def _get(url: str, headers: dict[str, str]) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers)  # noqa: S310 - our own servers
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310
            return answer.status, answer.read()
    except urllib.error.HTTPError as refused:
        return refused.code, b""
    except OSError:
        return 0, b""


def _ssh_tunnel(workdir: Path, cluster: Any, key: str, node: str, port: int) -> tuple[Any, int]:
    """`ssh -N -L` as alice to the session's node and port; (process, local port)."""
    key_file = workdir / "alice.key"
    key_file.write_text(key)
    key_file.chmod(0o600)
    known = workdir / "known_hosts"
    known.write_text(f"[{cluster.ssh_host}]:{cluster.ssh_port} {cluster.host_key}\n")
    local = free_port()
    argv = [
        "ssh", "-N", "-i", str(key_file), "-p", str(cluster.ssh_port),
        "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
        "-o", "BatchMode=yes", "-o", "ExitOnForwardFailure=yes",
        "-L", f"127.0.0.1:{local}:{node}:{port}", f"alice@{cluster.ssh_host}",
    ]  # fmt: skip
    process = subprocess.Popen(argv)
    _wait(lambda: _accepts(local), 30, "the SSH tunnel")
    return process, local


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


Times = dict[str, list[float]]


def _measure(
    *,
    portal: str,
    direct: str,
    kernel: str,
    portal_headers: dict[str, str],
    cookie: dict[str, str],
    token: dict[str, str],
) -> tuple[Times, Times]:
    """Kernel round trips on one kernel, then GETs of api/status: portal and direct, alternating."""
    from websockets.sync.client import connect

    channels = f"api/kernels/{kernel}/channels"
    times: Times = {"portal": [], "direct": []}
    http: Times = {"portal": [], "direct": []}
    session = uuid.uuid4().hex
    with (
        connect(
            portal.replace("http", "ws", 1) + channels,
            additional_headers=portal_headers,
            open_timeout=30,
        ) as ws_portal,
        connect(
            direct.replace("http", "ws", 1) + channels, additional_headers=token, open_timeout=30
        ) as ws_direct,
    ):
        for ws in (ws_portal, ws_direct):
            _execute(ws, session)  # warm
        for _ in range(REPEATS):
            times["portal"].append(_execute(ws_portal, session))
            times["direct"].append(_execute(ws_direct, session))
    for _ in range(REPEATS):
        for name, url, headers in (
            ("portal", f"{portal}api/status", cookie),
            ("direct", f"{direct}api/status", token),
        ):
            begun = time.perf_counter()
            status, _ = _get(url, headers)
            if status != 200:
                raise SystemExit(f"{name} api/status answered {status}")
            http[name].append(time.perf_counter() - begun)
    return times, http


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    ensure_database()
    import django

    django.setup()
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from clusters import sandbox
    from clusters.models import ClusterAccount
    from clusters.selectors import account_endpoint
    from clusters.ssh import Connection
    from jobs.enums import Template
    from jobs.interactive import SESSION_FILE, lab_base_url
    from jobs.models import Job
    from jobs.services import job_submit
    from jobs.specs import JobSpec

    call_command("migrate", verbosity=0)
    cluster = bench_cluster()
    from django.conf import settings

    alice_key = sandbox.up(settings.SANDBOX_STATE_DIR).users["alice"]
    user = User.objects.get(username="alice")
    project = bench_project(user=user, slug="bench-session", name="Session")
    session, cookie = session_headers(user)
    spec = JobSpec(
        name="session-bench",
        template=Template.JUPYTER,
        command="jupyter lab",
        nodes=1,
        gpus_per_node=1,
        cpus_per_task=2,
        memory_mb=None,
        time_limit=timedelta(minutes=15),
        partition="gpu",
    )
    workdir = Path(tempfile.mkdtemp(prefix="bench-session-"))
    env = server_env(
        database_url=os.environ["DATABASE_URL"],
        redis_url=os.environ["REDIS_URL"],
        tag=os.environ.get("PORTAL_TEST_RUN", "bench"),
    )
    purge_queue(env)
    worker = celery_worker(env, workdir, name=f"bench-session-{os.getpid()}")
    daphne = Daphne(env, workdir)
    jobs: list[Job] = []
    tunnel = None
    try:
        with running(worker, daphne):
            try:
                job = job_submit(user=user, project=project, cluster=cluster, spec=spec)
                jobs.append(job)
                base = lab_base_url(job.pk)
                portal = f"http://127.0.0.1:{daphne.port}{base}"
                origin = {"Origin": daphne.url.rstrip("/")}
                started = time.monotonic()
                _wait(
                    lambda: _get(f"{portal}api/status", cookie)[0] == 200,
                    START_TIMEOUT,
                    "JupyterLab through the portal",
                )
                print(
                    f"JupyterLab answered through the portal {time.monotonic() - started:.0f} s "
                    "after the submission"
                )
                attempt = Job.objects.get(pk=job.pk).attempts.get()
                account = ClusterAccount.objects.get(cluster=cluster, username="alice")
                with Connection(account_endpoint(account=account)) as alice:
                    path = f"{attempt.run_dir}/{SESSION_FILE}"
                    written = json.loads(alice.run(f"cat -- {shlex.quote(path)}").stdout)
                token = {"Authorization": f"token {written['token']}"}
                request = urllib.request.Request(  # noqa: S310
                    f"{portal}api/kernels", data=b"{}", method="POST",
                    headers={**cookie, **origin, "Content-Type": "application/json"},
                )  # fmt: skip
                with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310
                    kernel = json.loads(answer.read())["id"]
                tunnel, local = _ssh_tunnel(
                    workdir, cluster, alice_key, attempt.node_list, written["port"]
                )
                direct = f"http://127.0.0.1:{local}{base}"
                times, http = _measure(
                    portal=portal,
                    direct=direct,
                    kernel=kernel,
                    portal_headers={**cookie, **origin},
                    cookie=cookie,
                    token=token,
                )
            finally:
                if tunnel is not None:
                    tunnel.terminate()
                    tunnel.wait(10)
                jobs_cancel_on_slurm(jobs=jobs, user=user)
    finally:
        delete_jobs_without_charges(pk__in=[job.pk for job in jobs])
        session.delete()

    print(f"{REPEATS} round trips each, alternating, on one kernel (ms)")
    print(f"{'':<50} | {'p50':>7} | {'p95':>7}")
    for title, data in (("kernel execute (WebSocket)", times), ("GET api/status (HTTP)", http)):
        for name in ("portal", "direct"):
            p50, p95 = _quantiles(data[name])
            label = f"{title}, {'through the portal' if name == 'portal' else 'ssh -L tunnel'}"
            print(f"{label:<50} | {p50:7.2f} | {p95:7.2f}")
    added = statistics.median(times["portal"]) - statistics.median(times["direct"])
    print(f"the proxy adds {added * 1000:.2f} ms (p50) to a kernel round trip; logs: {workdir}")


if __name__ == "__main__":
    main()
