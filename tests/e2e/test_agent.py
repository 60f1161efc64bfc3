"""The portal agent on the sandbox cluster, over the real SSH gateway."""

import re
import shlex
import uuid
from collections.abc import Iterator

import pytest
from django.conf import settings

from clusters.agent import (
    AgentCommand,
    AgentRequest,
    FileRead,
    run_agent,
)
from clusters.sandbox.config import Paths
from clusters.slurm import SlurmTools
from clusters.ssh import CommandResult, Connection
from tests.helpers import sbatch, slurm_name

pytestmark = pytest.mark.sandbox


class CountingConnection:
    """Passes calls through to a real connection and records every command it runs."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.endpoint = connection.endpoint
        self.commands: list[str] = []

    def run(
        self, command: str, *, stdin: bytes = b"", timeout: float = 30.0, max_output: int = 1 << 26
    ) -> CommandResult:
        self.commands.append(command)
        return self.connection.run(command, stdin=stdin, timeout=timeout, max_output=max_output)


@pytest.fixture
def run_dir(alice: Connection) -> Iterator[str]:
    """An attempt's run directory in alice's home (absolute path), removed afterwards."""
    home = alice.run("pwd").text.strip()
    path = f"{home}/portal-runs/{uuid.uuid4()}"
    assert alice.run(f"mkdir -p -m 700 {shlex.quote(path)}").exit_status == 0
    yield path
    alice.run(f"rm -rf {shlex.quote(path)}")


def test_a_command_that_exits_before_reading_its_input_still_gives_its_status(
    alice: Connection,
) -> None:
    """A missing agent script exits at once; the reply must say so, not "connection lost"."""
    # More than one SSH window, so the send is still going on when the command has ended.
    big = b"x" * (8 * 1024 * 1024)
    for _ in range(3):
        result = alice.run("python3 -I .portal/no-such-agent.py", stdin=big, timeout=60)
        assert result.exit_status == 2 and b"No such file" in result.stderr
    assert alice.run("true", stdin=big, timeout=60).exit_status == 0
    assert alice.is_alive  # the connection is fine for the next command


def test_every_byte_of_a_large_output_arrives_with_its_status(alice: Connection) -> None:
    """sshd may send the exit status before the last of the output: read to EOF.

    A thousand jobs' squeue (or an agent reply) is hundreds of KB. Reading stopped at the
    exit status lost 30-60 KB of the end in 1 to 6 of these 45 commands (a loop of them
    on 2026-12-04), and running jobs then looked gone from the queue (bench/soak.py).
    """
    line = b"0123456789abcdef" * 7 + b"\n"  # squeue-like rows of 113 bytes
    for rows in (20_000, 60_000, 200_000):  # 2.3, 6.8 and 22.6 MB
        program = f"import sys; sys.stdout.buffer.write({line!r} * {rows})"
        command = f"python3 -c {shlex.quote(program)}; echo done >&2"
        for _ in range(15):
            result = alice.run(command, timeout=60)
            assert result.exit_status == 0
            assert len(result.stdout) == len(line) * rows
            assert result.stdout == line * rows
            assert result.stderr == b"done\n"


# What other tests write into alice's home meanwhile: their job scripts and outputs carry
# their run's and worker's tag (tests.helpers.slurm_name), or are Slurm's default output.
OTHER_TESTS_FILES = re.compile(r"-t[0-9a-f]+-(gw\d+|main)-|^slurm-\d+\.out$")


def _home(connection: Connection) -> set[str]:
    names = connection.run("ls -A").text.split("\n")
    return {name for name in names if name and not OTHER_TESTS_FILES.search(name)}


def test_each_poll_is_one_command_and_leaves_nothing_in_the_home(alice: Connection) -> None:
    before = _home(alice)
    counting = CountingConnection(alice)
    request = AgentRequest(commands=[AgentCommand("hostname", ["hostname"], timeout=10)])

    first = run_agent(counting, request)
    second = run_agent(counting, request)
    assert first.commands["hostname"].exit == 0
    assert len(counting.commands) == 2  # one exec per poll, no install step
    assert second.commands["hostname"].stdout == first.commands["hostname"].stdout
    assert _home(alice) == before


def test_squeue_through_the_agent_lists_alices_jobs(alice: Connection) -> None:
    name = slurm_name("e2e-agent")
    job_id = sbatch(alice, f"--job-name={shlex.quote(name)} --time=00:02:00 --wrap 'sleep 60'")
    try:
        tools = SlurmTools(conf=str(Paths.of(settings.SANDBOX_STATE_DIR).slurm_conf))
        argv = tools.wrap(["squeue", "--noheader", "--user=alice", "--format=%i|%j|%T"])
        reply = run_agent(alice, AgentRequest(commands=[AgentCommand("squeue", argv)]))
        squeue = reply.commands["squeue"]
        assert squeue.exit == 0, squeue.stderr
        rows = [line.split("|") for line in squeue.stdout.splitlines()]
        assert [job_id, name] in [row[:2] for row in rows]
    finally:
        alice.run(f"scancel {shlex.quote(job_id)}")


def test_log_is_read_by_offset_over_two_cycles(alice: Connection, run_dir: str) -> None:
    log = f"{run_dir}/stdout.log"
    first_bytes = b"epoch 1\r 10%\r 90%\r100%\n\x00\xff"
    more_bytes = b"loss=0.5 \xe2\x82\n"
    alice.upload(log, first_bytes)

    first = run_agent(alice, AgentRequest(files=[FileRead("log", log, 0)])).files["log"]
    assert first.data == first_bytes and first.error is None and first.inode

    append = alice.run(f"cat >> {shlex.quote(log)}", stdin=more_bytes)
    assert append.exit_status == 0
    second = run_agent(alice, AgentRequest(files=[FileRead("log", log, first.end)])).files["log"]
    assert second.offset == len(first_bytes) and second.data == more_bytes
    assert second.size == len(first_bytes + more_bytes) and second.inode == first.inode


def test_bob_cannot_read_alices_run(alice: Connection, bob: Connection, run_dir: str) -> None:
    alice.upload(f"{run_dir}/stdout.log", b"alice's secret loss curve")
    request = AgentRequest(
        files=[
            FileRead("alice", f"{run_dir}/stdout.log", 0),
            FileRead("missing", "portal-runs/not-started/stdout.log", 0),
        ]
    )
    reply = run_agent(bob, request)
    assert reply.files["alice"].error == "permission denied" and reply.files["alice"].data == b""
    assert reply.files["missing"].error == "not found"
