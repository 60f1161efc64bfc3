"""The portal agent's client (`run_agent`) against a local shell standing in for SSH."""

import os
import signal
import subprocess
from pathlib import Path

import pytest

from clusters.agent import (
    AGENT_SOURCE,
    AgentCommand,
    AgentError,
    AgentRequest,
    FileRead,
    agent_command,
    agent_stdin,
    run_agent,
)
from clusters.ssh import (
    MAX_OUTPUT_BYTES,
    CommandResult,
    CommandTimedOut,
    Endpoint,
    OutputCapExceeded,
)
from tests.clusters.agent_env import PYTHON


class LocalShell:
    """Runs commands with sh in a fake home directory; counts them like a connection would,
    and like one ends a command at its deadline or its output cap."""

    def __init__(self, home: Path, *, banner: str = "") -> None:
        self.home = home
        self.banner = banner
        self.endpoint = Endpoint("local", "localhost", 22, "ssh-ed25519 AAAA", home.name, "")
        self.commands: list[str] = []

    def run(
        self,
        command: str,
        *,
        stdin: bytes = b"",
        timeout: float = 30,
        max_output: int = MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        self.commands.append(command)
        with subprocess.Popen(
            ["sh", "-c", f"{self.banner}{command}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=self.home,
            start_new_session=True,
        ) as proc:
            try:
                stdout, stderr = proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
                raise CommandTimedOut("past its deadline", timeout=timeout) from None
        if len(stdout) + len(stderr) > max_output:
            raise OutputCapExceeded("over the cap", cap=max_output)
        return CommandResult(proc.returncode, stdout, stderr)


def test_each_poll_is_one_command_that_sends_the_agent_and_stores_nothing(
    tmp_path: Path,
) -> None:
    shell = LocalShell(tmp_path)
    (tmp_path / "train.log").write_bytes(b"\x00loss=1\r")
    request = AgentRequest(files=[FileRead("log", str(tmp_path / "train.log"), 1)])

    first = run_agent(shell, request, python=PYTHON)
    second = run_agent(shell, request, python=PYTHON)
    assert shell.commands == [agent_command(PYTHON)] * 2
    assert shell.commands[0].startswith("/usr/bin/env -i PATH=/usr/bin:/bin ")
    assert " -I -c " in shell.commands[0]
    assert first.files["log"].data == b"loss=1\r" and first.files["log"].end == 8
    assert second.files == first.files
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.log"]  # nothing installed


def test_a_replaced_agent_file_or_python_on_path_changes_nothing(tmp_path: Path) -> None:
    """What a job can write (its home, its PATH, PYTHON* variables) never runs as the agent."""
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    for name in ("python3", "squeue", "env"):
        (fake_bin / name).write_text('#!/bin/sh\necho \'{"version": 1, "forged": true}\'\n')
        (fake_bin / name).chmod(0o755)
    (tmp_path / ".portal").mkdir()
    (tmp_path / ".portal" / "agent.py").write_text("print('forged')\n")
    (tmp_path / "sitecustomize.py").write_text("print('forged')\n")
    shell = LocalShell(
        tmp_path, banner=f"export PATH={fake_bin}:$PATH PYTHONPATH={tmp_path} PYTHONSTARTUP=x; "
    )
    reply = run_agent(
        shell,
        AgentRequest(commands=[AgentCommand("path", ["/bin/sh", "-c", "echo $PATH"])]),
        python="python3",
    )
    assert reply.commands["path"].stdout == "/usr/bin:/bin\n"


def test_the_agent_travels_ahead_of_the_request_on_stdin() -> None:
    stdin = agent_stdin(AgentRequest())
    length, rest = stdin.split(b"\n", 1)
    assert rest[: int(length)] == AGENT_SOURCE
    assert rest[int(length) :] == AgentRequest().to_json()


def test_run_agent_tolerates_a_chatty_login_shell(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, banner="echo 'Welcome to the cluster!'; ")
    reply = run_agent(shell, AgentRequest(), python=PYTHON)
    assert reply.files == {} and reply.time > 0


def test_run_agent_raises_on_a_refused_request(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path)
    with pytest.raises(AgentError, match=r"refused the request.*offset") as caught:
        run_agent(shell, AgentRequest(files=[FileRead("x", "/x", -5)]), python=PYTHON)
    assert caught.value.retryable is False


def test_run_agent_raises_with_stderr_on_a_broken_reply(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path, banner="echo agent exploded >&2; exit 1; ")
    with pytest.raises(AgentError, match=r"no JSON reply.*agent exploded") as caught:
        run_agent(shell, AgentRequest(), python=PYTHON)
    assert caught.value.retryable is True


def test_run_agent_says_when_python_is_missing(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="cannot start") as caught:
        run_agent(LocalShell(tmp_path), AgentRequest(), python="no-such-python3")
    assert caught.value.retryable is False
