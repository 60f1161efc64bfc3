"""The portal's real servers (daphne, a Celery worker with beat) as child processes.

Used by the tests and the benchmarks alike. Each server runs in a process group
of its own, so that stopping it stops its children too (Celery's pool), and
`running()` stops every server it started, also when the code inside fails.
Each server carries `PORTAL_SERVER_TAG` in its environment (its children
inherit it), so that whoever started them can check that none is left:
`leftover_processes(tag)`.
"""

from __future__ import annotations

import os
import pwd
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from kombu import Connection

ROOT = Path(__file__).resolve().parent.parent
TAG_VARIABLE = "PORTAL_SERVER_TAG"


def wait_until(
    predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1
) -> None:
    """Poll `predicate` until it is true; TimeoutError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def server_env(
    *, database_url: str, redis_url: str, tag: str, extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """This process's environment, pointed at one database and one Redis database."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": os.environ.get("DJANGO_SETTINGS_MODULE", "portal.settings.test"),
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "CELERY_BROKER_URL": redis_url,
        TAG_VARIABLE: tag,
        **(extra or {}),
    }


class Server:
    """One server process (and its children) in a process group of its own: a Python
    module of this checkout (`args` after `python -m`), or any program (`argv`), as this
    process's user or as `user` (its own group, no other)."""

    def __init__(
        self,
        name: str,
        args: list[str],
        env: Mapping[str, str],
        workdir: Path,
        ready: Callable[[], bool] | None = None,
        *,
        argv: list[str] | None = None,
        cwd: Path = ROOT,
        user: str | None = None,
    ) -> None:
        self.name = name
        self.args = args
        self.argv = argv if argv is not None else [sys.executable, "-m", *args]
        self.cwd = cwd
        self.user = user
        self.env = dict(env)
        self.log_path = workdir / f"{name}.log"
        self.ready = ready
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self, timeout: float = 60) -> None:
        """Start it and wait (polling, up to `timeout` s) until it is ready."""
        if self._log is not None:
            self._log.close()  # started again after a kill
        self._log = self.log_path.open("ab")
        as_user: dict[str, Any] = {}
        if self.user is not None:
            group = pwd.getpwnam(self.user).pw_gid
            as_user = {"user": self.user, "group": group, "extra_groups": []}
        self.proc = subprocess.Popen(
            self.argv,
            cwd=self.cwd,
            env=self.env,
            **as_user,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            # A session of its own: a Ctrl-C or a test's timeout reaches the caller only,
            # which then stops the whole group itself.
            start_new_session=True,
        )
        if self.ready is not None:
            ready = self.ready

            def up() -> bool:
                if not self.alive:
                    raise RuntimeError(f"{self.name} exited; see {self.log_path}")
                return ready()

            try:
                wait_until(up, timeout, f"{self.name} (log: {self.log_path})")
            except BaseException:
                self.stop()
                raise

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _signal_group(self, signum: int) -> None:
        if self.proc is not None:
            with suppress(ProcessLookupError, PermissionError):  # the group is gone
                os.killpg(self.proc.pid, signum)

    def kill(self) -> None:
        """kill -9 of the server and its children, as a crash would."""
        self._signal_group(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM to the group, SIGKILL after `timeout` s; children left over are killed too."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._signal_group(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.proc.wait(timeout=30)
        self._signal_group(signal.SIGKILL)  # a pool child that outlived its parent
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_tail(self, lines: int = 40) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def celery_worker(
    env: Mapping[str, str],
    workdir: Path,
    *,
    name: str,
    beat: bool = True,
    concurrency: int = 2,
    pool: str = "prefork",
    queues: str = "",
) -> Server:
    """A Celery worker (with embedded beat) on the database and Redis that `env` names;
    `queues` (comma-separated) instead of the default queue."""
    args = ["celery", "-A", "portal", "worker", f"--pool={pool}", f"--concurrency={concurrency}"]
    if queues:
        args += ["-Q", queues]
    if beat:
        args += ["--beat", f"--schedule={workdir / f'{name}-beat-schedule'}"]
    args += ["--loglevel=INFO", "--without-gossip", "--without-mingle", "-n", f"{name}@localhost"]
    return Server(name, args, env, workdir)


class Daphne(Server):
    """The ASGI stack (pages, REST, WebSockets) on a free port; ready once its log says it
    listens there.

    Not once the port accepts: another process may take the port between free_port's probe
    and daphne's bind (a sandbox job's JupyterLab kernel did, on this one machine). Then the
    port accepted, the test talked to the kernel, and daphne had exited. Now daphne's exit is
    seen, nothing is sent to the stranger, and daphne starts again on another port.
    """

    STARTS = 3

    def __init__(self, env: Mapping[str, str], workdir: Path, *, name: str = "daphne") -> None:
        self.port = free_port()
        self._log_from = 0
        env = {"DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost", **env}
        super().__init__(name, self._args(), env, workdir, ready=self._listening)

    def _args(self) -> list[str]:
        return ["daphne", "-b", "127.0.0.1", "-p", str(self.port), "portal.asgi:application"]

    def _listening(self) -> bool:
        with self.log_path.open("rb") as log:
            log.seek(self._log_from)
            said = log.read()
        return f"Listening on TCP address 127.0.0.1:{self.port}\n".encode() in said

    def start(self, timeout: float = 60) -> None:
        for tries_left in reversed(range(self.STARTS)):
            self._log_from = self.log_path.stat().st_size if self.log_path.exists() else 0
            try:
                super().start(timeout)
                return
            except RuntimeError:  # it exited: its port was taken meanwhile
                if tries_left == 0:
                    raise
                self.port = free_port()
                self.args = self._args()
                self.argv = [sys.executable, "-m", *self.args]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def purge_queue(env: Mapping[str, str]) -> None:
    """Drop tasks a previous run left in the Redis queues that `env` names.

    What `celery purge -f` does, without starting Django and Celery in a process of
    its own for it (seconds of CPU each time a test starts a worker).
    """
    with Connection(env.get("CELERY_BROKER_URL") or env["REDIS_URL"]) as connection:
        channel: Any = connection.default_channel  # kombu's virtual channel
        for queue in settings.CELERY_TASK_QUEUES:  # what a worker without -Q reads
            channel.queue_purge(queue.name)


@contextmanager
def running(*servers: Server) -> Iterator[tuple[Server, ...]]:
    """Start the servers in order; stop every one that started, whatever happens inside."""
    with ExitStack() as stack:
        for server in servers:
            server.start()
            stack.callback(server.stop)
        yield servers


def leftover_processes(tag: str) -> list[tuple[int, str]]:
    """(pid, command line) of every live process whose environment carries `tag`."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            cmdline = (entry / "cmdline").read_bytes()
            status = (entry / "stat").read_text()
        except OSError:
            continue  # gone, or not ours to read
        if needle not in environ.split(b"\0") or status.rsplit(")", 1)[-1].split()[0] == "Z":
            continue
        found.append((int(entry.name), cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def kill_processes(pids: list[int]) -> None:
    for pid in pids:
        with suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
