"""`sandbox down` and `up` again, and the clear errors of `up`; runs after the job tests."""

import contextlib
import os
import socket
import subprocess
from pathlib import Path

import pytest
from django.conf import settings

from clusters import sandbox
from clusters.sandbox import config, daemons, system
from tests.helpers import wait_for

# Takes the whole sandbox down and up: no other sandbox test runs meanwhile.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive]
JOB_MARK = "sandbox-down-tenant-job"


def _pids(state_dir: Path) -> dict[str, int | None]:
    return {
        daemon.name: daemons.running_pid(daemon)
        for daemon in daemons.daemons(config.Paths.of(state_dir))
    }


def _marked() -> list[str]:
    found = subprocess.run(["pgrep", "-f", JOB_MARK], capture_output=True, text=True)
    return found.stdout.split()


def _alive(process: tuple[int, str | None]) -> bool:
    """Running, not a zombie waiting to be reaped, and the same process, not another that
    got its pid since (`daemons.process_start`)."""
    pid, started = process
    return started is not None and daemons.process_start(pid) == started


def test_down_stops_only_its_own_processes_and_up_restores(sandbox_info) -> None:
    state_dir = settings.SANDBOX_STATE_DIR
    before = _pids(state_dir)
    assert all(before.values()), before
    processes = {name: (pid, daemons.process_start(pid)) for name, pid in before.items() if pid}
    # A bystander: another slurmd-looking process that the sandbox did not start.
    bystander = subprocess.Popen(["bash", "-c", "exec -a slurmd-bystander sleep 120"])
    try:
        # A tenant's job still running: its processes outlived slurmd (a JupyterLab did).
        paths = config.Paths.of(state_dir)
        subprocess.run(
            ["runuser", "-u", "alice", "--", "sbatch", "--chdir=/tmp", "-o", "/dev/null",
             "--wrap", f"exec python3 -c 'import time; time.sleep(300)' {JOB_MARK}"],
            env=daemons.slurm_env(paths), check=True, capture_output=True, timeout=30,
        )  # fmt: skip
        wait_for(lambda: _marked() != [], 60, "the tenant's job running")
        stopped = sandbox.down(state_dir)
        assert _marked() == []  # cancelled, and ended, before the daemons stopped
        assert sorted(stopped) == sorted(before)
        # `down` returns once every daemon has exited, not once its pid file is gone.
        assert [name for name, process in processes.items() if _alive(process)] == []
        assert bystander.poll() is None
        assert sandbox.down(state_dir) == []  # harmless when nothing runs

        info = sandbox.up(state_dir)
        assert info.host_key == sandbox_info.host_key  # the pinned key survives a restart
        assert all(_pids(state_dir).values())
    finally:
        bystander.kill()
        bystander.wait()
        with contextlib.suppress(Exception):  # the failure above is the one to report
            sandbox.up(state_dir)  # whatever failed above, the tests after this one get a sandbox


def test_a_taken_port_is_named_with_the_fix() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        with pytest.raises(system.SandboxError) as caught:
            system.check_port(port, "sshd")
    message = str(caught.value)
    assert f"Port {port}" in message and "sshd" in message and "ss -ltnp" in message


def test_not_root_is_refused_with_the_fix(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(system.SandboxError, match=r"must be started as root.*sudo"):
        sandbox.up(tmp_path)
    assert not any(tmp_path.iterdir())  # refused before writing anything


def test_a_package_that_cannot_be_installed_is_named(monkeypatch) -> None:
    monkeypatch.setitem(system.PACKAGES, "slurmd", "/nonexistent/slurmd")
    commands: list[list[str]] = []

    def apt_fails(cmd: list[str], **kwargs: object) -> str:
        commands.append(cmd)
        raise system.SandboxError("E: Unable to locate package slurmd")

    # apt itself is the one part not run for real: the test must not change the machine.
    monkeypatch.setattr(system, "run", apt_fails)
    with pytest.raises(system.SandboxError, match=r"Could not install slurmd.*apt-get install"):
        system.ensure_packages()
    assert [c[:2] for c in commands] == [
        ["apt-get", "install"],
        ["apt-get", "update"],
        ["apt-get", "install"],
    ]
