import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.db import connection

from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.services import cluster_register_sandbox
from clusters.ssh import Connection
from projects.models import Membership

ROOT = Path(__file__).resolve().parents[2]
POLL_INTERVAL = 0.5


@pytest.fixture
def sandbox_cluster(db: None, sandbox_info) -> Cluster:
    return cluster_register_sandbox(info=sandbox_info)


def _connect(cluster: Cluster, username: str) -> Connection:
    account = ClusterAccount.objects.select_related("cluster").get(
        cluster=cluster, username=username
    )
    return Connection(account_endpoint(account=account))


@pytest.fixture
def alice(sandbox_cluster: Cluster) -> Iterator[Connection]:
    with _connect(sandbox_cluster, "alice") as connection:
        yield connection


@pytest.fixture
def bob(sandbox_cluster: Cluster) -> Iterator[Connection]:
    with _connect(sandbox_cluster, "bob") as connection:
        yield connection


class Worker:
    """A real Celery worker with embedded beat, on the test database and Redis."""

    def __init__(self, database_name: str, workdir: Path) -> None:
        settings_dict = connection.settings_dict
        user = settings_dict["USER"] or "postgres"
        host = settings_dict["HOST"] or "127.0.0.1"
        port = settings_dict["PORT"] or 5432
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "portal.settings.test",
            "DATABASE_URL": f"postgres://{user}@{host}:{port}/{database_name}",
            "POLL_INTERVAL": str(POLL_INTERVAL),
            "RECONCILE_INTERVAL": "2",
            "SUBMIT_STUCK_AFTER": "4",
            # Lose deadlocks against a test's flush (see portal.settings.test).
            "TEST_DEADLOCK_TIMEOUT": "100ms",
        }
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        log = open(self.workdir / "worker.log", "ab")  # noqa: SIM115 - kept open for the child
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "portal",
                "worker",
                "--beat",
                f"--schedule={self.workdir / 'beat-schedule'}",
                "--concurrency=2",
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "-n",
                f"e2e-{os.getpid()}@localhost",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def kill(self) -> None:
        """kill -9 of the worker and its pool processes, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, lines: int = 40) -> str:
        text = (self.workdir / "worker.log").read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])


# Package scope: the worker stops when the last package using it ends, so that no
# background poll writes into the test database while later tests run. The
# packages that use it (e2e, browser, clients) share ONE worker: their tests can
# interleave (pytest-django runs transactional tests last), and two workers on
# one queue would take each other's tasks (a killed worker's task done by another).
@dataclass
class _SharedWorker:
    worker: Worker | None = None
    users: int = 0


_shared = _SharedWorker()


@pytest.fixture(scope="package")
def celery_worker(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Worker]:
    worker = _shared.worker
    if worker is None:
        subprocess.run(
            [sys.executable, "-m", "celery", "-A", "portal", "purge", "-f"],
            cwd=ROOT,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.test"},
            check=True,
            capture_output=True,
        )
        worker = Worker(connection.settings_dict["NAME"], tmp_path_factory.mktemp("worker"))
        worker.start()
        _shared.worker = worker
    _shared.users += 1
    try:
        yield worker
    finally:
        _shared.users -= 1
        if _shared.users == 0:
            worker.stop()
            _shared.worker = None


@pytest.fixture
def researcher(transactional_db, sandbox_cluster: Cluster, project) -> User:
    """The portal user `alice`, whose jobs run as the cluster user alice."""
    user = User.objects.get(username="alice")
    Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


def wait_for(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="package")
def asgi_server(django_db_setup, tmp_path_factory) -> Iterator[str]:
    """The real ASGI stack (daphne: pages, REST, WebSockets) on the test database."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {
        **Worker(connection.settings_dict["NAME"], tmp_path_factory.mktemp("web")).env,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
    }
    log = tmp_path_factory.mktemp("daphne") / "daphne.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "daphne",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "portal.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(port), 30, f"daphne on port {port} (log: {log})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


EXAMPLE = ROOT / "examples" / "ddp_train.py"


def submit_ddp_example(
    alice: Connection, researcher: User, project, cluster: Cluster, *, name: str, args: str
):
    """The example trainer on 2 nodes x 1 GPU through the torchrun template."""
    from jobs.models import Template
    from jobs.services import job_submit
    from tests.jobs.factories import spec

    if alice.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    alice.run("mkdir -p -m 700 portal-examples")
    alice.upload("portal-examples/ddp_train.py", EXAMPLE.read_bytes(), mode=0o600)
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(
            name=name,
            template=Template.TORCHRUN,
            command=f"portal-examples/ddp_train.py {args}",
            nodes=2,
            gpus_per_node=1,
        ),
    )
