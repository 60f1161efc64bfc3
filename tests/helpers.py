"""Plain functions and constants that tests share (fixtures live in tests/fixtures/)."""

import json
import os
import pwd
import shlex
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.db import connection as database
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from clusters.models import Cluster, ClusterAccount
from clusters.sandbox.config import GPUS_PER_NODE, NODES
from clusters.selectors import account_endpoint
from clusters.ssh import Connection
from devtools.servers import wait_until
from jobs.enums import Template
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.logs.store import Delivery, log_files, log_store
from monitoring.models import EfficiencyCard
from projects.models import Project, UsageCharge
from tests.factories import spec

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "correct horse battery staple"
EXAMPLE = ROOT / "examples" / "ddp_train.py"
CLIENT_SRC = ROOT / "clients" / "python"
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
# The pictures docs/ shows, as this run took them: `make screenshots` copies them into docs/
# (a test run never writes the tracked tree).
DOC_SHOTS = ROOT / "test-artifacts" / "docs"
LOG = b"step 1 loss 0.9\nstep 2 loss 0.7\nstep 3 loss 0.5\n"
# The metrics token of the tests and of the live servers they start (tests/fixtures/servers.py).
METRICS_TOKEN = "test-metrics-token-0123456789abcdef"
# Set once per run by the controller (tests/harness.py); xdist workers inherit it.
RUN_TAG_VARIABLE = "PORTAL_TEST_RUN"


def run_tag() -> str:
    """This run's marker: in the names of the Slurm jobs it makes, in its servers' environment."""
    return os.environ.get(RUN_TAG_VARIABLE, "tlocal")


def worker_tag() -> str:
    """This run's and this xdist worker's marker (tests on one worker run one at a time)."""
    return f"{run_tag()}-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"


def other_sessions() -> set[int]:
    """The PostgreSQL backends of the test database's other clients (servers, threads)."""
    with database.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
            " AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )
        return {pid for (pid,) in cursor.fetchall()}


def sbatch(connection: Connection, arguments: str) -> str:
    """`sbatch --parsable <arguments>` (quoted by the caller) on `connection`; the job id."""
    submitted = connection.run(f"sbatch --parsable {arguments}")
    assert submitted.exit_status == 0, submitted.error_text or submitted.text
    job_id = submitted.text.strip().split(";")[0]
    assert job_id.isdigit(), submitted.text
    return job_id


def hold_every_gpu(connection: Connection, *, minutes: int, seconds: int) -> str:
    """A job named `blocker` on every sandbox node and GPU (for a test alone on the
    sandbox): what is submitted behind it pends on Resources. Its Slurm job id."""
    return sbatch(
        connection,
        f"--nodes={len(NODES)} --ntasks-per-node=1 --gres=gpu:{GPUS_PER_NODE} "
        f"--time={minutes} --job-name=blocker --wrap 'sleep {seconds}'",
    )


def slurm_name(prefix: str) -> str:
    """A Slurm job name that says which run and worker made it (see tests/fixtures/sandbox.py)."""
    return f"{prefix}-{worker_tag()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class Printer:
    """A job that prints a numbered line every `every` s until the test says stop.

    So that a job lasts as long as the test's scenario, not a guess at it: a fixed length
    either ends the job before a slow scenario is done or makes the test wait for the rest.
    The flag is a file in the user's home, which the jobs (on the sandbox's nodes, on this
    machine) see and the run's end removes (tests/harness.py); the last line says how
    many lines came before it. Bounded by `most` lines. Stop it in a `finally`: a job left
    printing would hold its GPUs for minutes.
    """

    flag: Path
    every: float = 0.3
    most: int = 2000

    @classmethod
    def new(cls, every: float = 0.3, user: str = "alice") -> "Printer":
        return cls(Path(pwd.getpwnam(user).pw_dir) / f"stop-{slurm_name('printer')}", every)

    @property
    def command(self) -> str:
        flag = shlex.quote(str(self.flag))
        return (
            f"i=0; while [ ! -e {flag} ] && [ $i -lt {self.most} ]; do"
            f' i=$((i+1)); echo "line $i"; sleep {self.every}; done; echo "printed $i lines"'
        )

    def stop(self) -> None:
        self.flag.touch()

    @staticmethod
    def whole(log: bytes) -> bool:
        """Whether `log` is a printer's whole output: every line, in order, and the last."""
        lines = log.decode().splitlines()
        count = len(lines) - 1
        return count >= 1 and lines == [
            *(f"line {i}" for i in range(1, count + 1)),
            f"printed {count} lines",
        ]


# How long a test waits for a job that must first be scheduled: on the shared sandbox
# (6 GPUs on 3 nodes that share the machine's CPUs) other workers' jobs may hold it,
# and a busy machine slows everything.
QUEUE_WAIT = 240


def wait_for(predicate: object, timeout: float, what: str) -> None:
    """Poll until `predicate()` is true; fail the test (only it) after `timeout` s."""
    try:
        wait_until(predicate, timeout, what)  # type: ignore[arg-type]
    except TimeoutError as exc:
        pytest.fail(str(exc))


def upload_example(connection: Connection) -> str:
    """The example trainer in the user's home on the cluster, as a researcher would put it."""
    if connection.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    connection.run("mkdir -p -m 700 portal-examples")
    connection.upload("portal-examples/ddp_train.py", EXAMPLE.read_bytes(), mode=0o600)
    return "portal-examples/ddp_train.py"


def submit_ddp_example(
    alice: Connection, researcher: User, project: Project, cluster: Cluster, *, name: str, args: str
) -> Job:
    """The example trainer on 2 nodes x 1 GPU through the torchrun template."""
    path = upload_example(alice)
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(
            name=name,
            template=Template.TORCHRUN,
            command=f"{path} {args}",
            nodes=2,
            gpus_per_node=1,
        ),
    )


def attempt_processes(attempt: Attempt) -> list[tuple[int, dict[str, str]]]:
    """(pid, environment) of every process of the attempt on this machine (the sandbox nodes)."""
    marker = f"PORTAL_ATTEMPT={attempt.uuid}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker in raw.split(b"\0"):
            env = dict(
                item.decode(errors="replace").partition("=")[::2]
                for item in raw.split(b"\0")
                if b"=" in item
            )
            found.append((int(entry.name), env))
    return found


def attempt_shell(attempt: Attempt) -> Connection:
    """A fresh SSH connection as the attempt's account (a long test outlasts an idle one)."""
    assert attempt.account_id is not None
    account = ClusterAccount.objects.select_related("cluster").get(pk=attempt.account_id)
    return Connection(account_endpoint(account=account))


def run_file(attempt: Attempt, name: str) -> str:
    with attempt_shell(attempt) as shell:
        return shell.run(f"cat {shlex.quote(attempt.run_dir + '/' + name)}").text


def step_reached_at(attempt: Attempt, step: int) -> float:
    """When rank 0 reached `step`, by its own clock (the example's metrics.jsonl)."""
    records = [json.loads(line) for line in run_file(attempt, "metrics.jsonl").splitlines() if line]
    # log_params writes a settings record, which has no step.
    return next(float(r["time"]) for r in records if r.get("step") == step)


def card_against_ledger(attempt: Attempt) -> tuple[dict[str, Any], UsageCharge]:
    """The attempt's efficiency card once it is computed against the ledger's charge, and the
    charge; its parts sum to the charge's GPU-hours (within 1 %) and none is negative."""
    wait_for(
        lambda: EfficiencyCard.objects.filter(attempt=attempt, from_ledger=True).exists(),
        120,
        f"attempt {attempt.number}'s card to be computed against its ledger charge",
    )
    card: dict[str, Any] = EfficiencyCard.objects.get(attempt=attempt).data
    charge = UsageCharge.objects.get(attempt=attempt)
    assert sum(card["parts"].values()) == pytest.approx(float(charge.gpu_hours), rel=0.01)
    assert all(hours >= 0 for hours in card["parts"].values())
    return card, charge


def store_log(attempt: Attempt, data: bytes, name: str = "stdout.log") -> None:
    files = log_files(attempt_ids=[attempt.pk], names=[name])
    offset = files[(attempt.pk, name)].size
    log_store(files=files, deliveries=[Delivery(attempt.pk, name, offset, data)])


@dataclass
class Tokens:
    owner: str
    owner_read: str
    member: str
    viewer: str
    outsider: str
    expired: str
    revoked: str


def bearer(token: str | None) -> Client:
    """A client that sends the token as `Authorization: Bearer` (none: anonymous)."""
    if token is None:
        return Client()
    return Client(headers={"Authorization": f"Bearer {token}"})


def browser_log_in(page, server: str, user: User) -> None:
    """Sign `user` in through the log-in form (their password set to PASSWORD first)."""
    user.set_password(PASSWORD)
    user.save()
    page.goto(f"{server}/")
    page.get_by_label("User name").fill(user.get_username())
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name=f"Hello, {user.get_username()}").wait_for()


def screenshot(page: object, name: str, *, full_page: bool = True) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    # A full-page shot on a busy machine can take longer than Playwright's 30 s default.
    page.screenshot(path=str(path), full_page=full_page, timeout=120_000)  # type: ignore[attr-defined]
    return path


def for_docs(shot: Path, name: str) -> Path:
    """Keep a screenshot as docs/<name> would show it, outside the tracked tree."""
    DOC_SHOTS.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copyfile(shot, DOC_SHOTS / name))


def metric_samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a /metrics answer: (name, labels, value)."""
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def session_cookie(user: User) -> str:
    """The session cookie's value for a fresh signed-in session of `user` (a database row)."""
    client = Client()
    client.force_login(user)
    return client.cookies[settings.SESSION_COOKIE_NAME].value
