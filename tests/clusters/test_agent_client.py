"""The portal agent's client (`run_agent`, `ensure_agent`) against a local shell standing in for SSH."""

import subprocess
from pathlib import Path

import pytest

from clusters.agent import (
    AGENT_HASH,
    AGENT_SOURCE,
    AgentError,
    AgentRequest,
    FileRead,
    agent_remote_path,
    ensure_agent,
    run_agent,
)
from clusters.ssh import CommandResult, Endpoint
from tests.clusters.agent_env import PYTHON


class LocalShell:
    """Runs commands with sh in a fake home directory; counts them like a connection would."""

    def __init__(self, home: Path, *, banner: str = "") -> None:
        self.home = home
        self.banner = banner
        # One account per home, so the per-process "installed" cache never spans tests.
        self.endpoint = Endpoint("local", "localhost", 22, "ssh-ed25519 AAAA", home.name, "")
        self.commands: list[str] = []

    def run(self, command: str, *, stdin: bytes = b"", timeout: float = 30) -> CommandResult:
        self.commands.append(command)
        proc = subprocess.run(
            ["sh", "-c", f"{self.banner}{command}"],
            input=stdin,
            capture_output=True,
            cwd=self.home,
            timeout=timeout,
        )
        return CommandResult(proc.returncode, proc.stdout, proc.stderr)


def test_run_agent_installs_once_then_polls_in_one_command(tmp_path: Path) -> None:
    shell = LocalShell(tmp_path)
    (tmp_path / "train.log").write_bytes(b"\x00loss=1\r")
    request = AgentRequest(files=[FileRead("log", str(tmp_path / "train.log"), 1)])

    first = run_agent(shell, request, python=PYTHON)
    assert len(shell.commands) == 3  # missing, install, retry
    installed = tmp_path / agent_remote_path()
    assert installed.read_bytes() == AGENT_SOURCE and installed.name == f"agent-{AGENT_HASH}.py"
    assert installed.stat().st_mode & 0o777 == 0o700
    assert installed.parent.stat().st_mode & 0o777 == 0o700
    assert first.files["log"].data == b"loss=1\r" and first.files["log"].end == 8

    second = run_agent(shell, request, python=PYTHON)
    ensure_agent(shell)  # this process already knows it is there
    assert len(shell.commands) == 4
    assert second.files == first.files


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
    shell = LocalShell(tmp_path)
    ensure_agent(shell)
    (tmp_path / agent_remote_path()).write_text("import sys\nsys.exit('agent exploded')\n")
    with pytest.raises(AgentError, match=r"no JSON reply.*agent exploded") as caught:
        run_agent(shell, AgentRequest(), python=PYTHON)
    assert caught.value.retryable is True


def test_run_agent_says_when_python_is_missing(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="cannot start") as caught:
        run_agent(LocalShell(tmp_path), AgentRequest(), python="no-such-python3")
    assert caught.value.retryable is False
