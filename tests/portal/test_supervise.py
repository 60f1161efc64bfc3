"""`make run`'s supervisor (devtools/supervise.py): a process that exits is started again;
a stop signal reaches the process and ends both."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from devtools.servers import wait_until

ROOT = Path(__file__).resolve().parents[2]


def _supervise(*command: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "devtools.supervise", "--pause", "0.1", "--", *command], cwd=ROOT
    )


def test_a_command_that_exits_is_started_again(tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    # Exits at once, as a worker does when its broker connection cannot be restored.
    dies = f"open({str(starts)!r}, 'a').write('x'); raise SystemExit(1)"
    supervisor = _supervise(sys.executable, "-c", dies)
    try:
        wait_until(lambda: starts.exists() and len(starts.read_text()) >= 3, 60, "three starts")
    finally:
        supervisor.send_signal(signal.SIGTERM)
        supervisor.wait(timeout=30)


def test_a_stop_signal_ends_the_command_and_the_supervisor(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    lives = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(600)"
    )
    supervisor = _supervise(sys.executable, "-c", lives)
    wait_until(lambda: pid_file.exists() and pid_file.read_text(), 60, "the command to start")
    child = int(pid_file.read_text())
    supervisor.send_signal(signal.SIGTERM)
    assert supervisor.wait(timeout=30) == 128 + signal.SIGTERM  # the command's end, as a shell says
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"the command (pid {child}) outlived its supervisor")


def test_the_procfile_supervises_every_process() -> None:
    lines = [line for line in (ROOT / "Procfile").read_text().splitlines() if line.strip()]
    assert lines and all(" -m devtools.supervise -- " in line for line in lines)
