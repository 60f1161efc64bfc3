"""What the portal's proxy adds to a JupyterLab session: one kernel execution's round trip.

A JupyterLab session (the `jupyter` template) runs on the sandbox. The same kernel is
driven three ways, alternating, over its WebSocket: through the portal (daphne and
Channels) reaching the node by the srun relay (Cluster.session_reach "srun": a step of
the session's job per stream, jobs.session_reach), through the portal by its SSH tunnel
("tunnel"), and through a direct SSH tunnel (`ssh -L`, OpenSSH, as the owner would open
one by hand, with the server's token). Each round trip is an `execute_request` of `1+1`
until its `execute_reply`; then one HTTP GET of the server's `api/status` the same three
ways (the portal's on its kept connections), and last what a new stream costs: opened on
the owner's login, one HTTP/1.0 GET of `api/status`, closed, by relay and by tunnel.

Needs root and the sandbox cluster (its job python with JupyterLab); uses `portal_bench`
and Redis database 15. Run: `.venv/bin/python bench/session_proxy.py [--quick]`.
"""

import contextlib
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


WAYS = ("srun", "tunnel", "direct")  # the portal by each Cluster.session_reach, then ssh -L


def _measure(
    *,
    portal: str,
    direct: str,
    kernel: str,
    portal_headers: dict[str, str],
    cookie: dict[str, str],
    token: dict[str, str],
    reach: Callable[[str], object],
) -> tuple[Times, Times]:
    """Kernel round trips on one kernel, then GETs of api/status, the three ways alternating;
    `reach` sets the cluster's session_reach (untimed) before each portal one."""
    from websockets.sync.client import connect

    channels = f"api/kernels/{kernel}/channels"
    times: Times = {way: [] for way in WAYS}
    http: Times = {way: [] for way in WAYS}
    session = uuid.uuid4().hex
    sockets = {}
    with contextlib.ExitStack() as stack:
        for way in WAYS:
            if way == "direct":
                url, headers = direct.replace("http", "ws", 1) + channels, token
            else:
                reach(way)  # a socket keeps the stream it opened on
                url, headers = portal.replace("http", "ws", 1) + channels, portal_headers
            ws = stack.enter_context(connect(url, additional_headers=headers, open_timeout=60))
            _execute(ws, session)  # warm
            sockets[way] = ws
        for _ in range(REPEATS):
            for way in WAYS:
                times[way].append(_execute(sockets[way], session))
    for _ in range(REPEATS + 1):
        for way in WAYS:
            if way != "direct":
                reach(way)
            url, headers = (direct, token) if way == "direct" else (portal, cookie)
            begun = time.perf_counter()
            status, _ = _get(f"{url}api/status", headers)
            if status != 200:
                raise SystemExit(f"{way} api/status answered {status}")
            http[way].append(time.perf_counter() - begun)
    return times, {way: values[1:] for way, values in http.items()}  # the first: warm-up


def _new_streams(connection: Any, *, attempt: Any, port: int, token: str, tools: Any) -> Times:
    """Open a stream to the server on the owner's login, GET api/status, close: each way."""
    from jobs.interactive import lab_base_url
    from jobs.session_reach import SessionWay

    request = (
        f"GET {lab_base_url(attempt.job_id)}api/status HTTP/1.0\r\n"
        f"Host: 127.0.0.1:{port}\r\nAuthorization: token {token}\r\n\r\n"
    ).encode()
    opened: Times = {"srun": [], "tunnel": []}
    for _ in range(max(REPEATS // 4, 5)):
        for way in opened:
            begun = time.perf_counter()
            reach = SessionWay(way, attempt.node_list, port, attempt.slurm_job_id, tools)
            stream = reach.open(connection, timeout=30)
            stream.settimeout(30)
            stream.sendall(request)
            answer = b""
            while chunk := stream.recv(65536):
                answer += chunk
            stream.close()
            if b" 200 " not in answer.split(b"\r\n", 1)[0]:
                raise SystemExit(f"a new {way} stream answered {answer[:80]!r}")
            opened[way].append(time.perf_counter() - begun)
    return opened


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
    from clusters.models import Cluster, ClusterAccount
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
                    reach=lambda way: Cluster.objects.filter(pk=cluster.pk).update(
                        session_reach=way
                    ),
                )
                with Connection(account_endpoint(account=account)) as alice:
                    opened = _new_streams(
                        alice,
                        attempt=attempt,
                        port=written["port"],
                        token=written["token"],
                        tools=cluster.slurm_tools,
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
    print(f"{'':<66} | {'p50':>7} | {'p95':>7}")
    labels = {
        "srun": "the portal, srun relay",
        "tunnel": "the portal, SSH tunnel",
        "direct": "ssh -L tunnel",
    }
    for title, data in (
        ("kernel execute (WebSocket)", times),
        ("GET api/status (HTTP)", http),
        ("new stream + GET + close", opened),
    ):
        for way, values in data.items():
            p50, p95 = _quantiles(values)
            print(f"{f'{title}, {labels[way]}':<66} | {p50:7.2f} | {p95:7.2f}")
    for way in ("srun", "tunnel"):
        added = statistics.median(times[way]) - statistics.median(times["direct"])
        print(f"{labels[way]} adds {added * 1000:.2f} ms (p50) to a kernel round trip")
    print(f"logs: {workdir}")


if __name__ == "__main__":
    main()
