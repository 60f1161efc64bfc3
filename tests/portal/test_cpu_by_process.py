"""devtools/cpu_by_process.py: a command's CPU by kind of process."""

import subprocess
import sys

from devtools import cpu_by_process
from tests.helpers import ROOT

# Half a second of this process's own CPU, however busy the machine; then it lingers, so
# that a sample (every half second) sees the whole of it.
SPIN = "import time\nwhile time.process_time() < 0.5: pass\ntime.sleep(1.5)"


def test_kinds_are_told_by_their_command_lines() -> None:
    kind = cpu_by_process.kind_of
    assert kind("/x/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))") == (
        "pytest xdist worker"
    )
    assert kind(".venv/bin/python -m celery -A portal worker --pool=prefork") == "celery"
    assert kind("postgres: 15/main: postgres test_portal_gw2 127.0.0.1(49032) idle") == (
        "postgres backend"
    )
    assert kind("/usr/lib/chromium/chromium --type=renderer") == "chromium"
    assert kind("[kworker/1:1H-kblockd]") == "other"


def test_a_commands_children_are_counted_by_kind() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "devtools" / "cpu_by_process.py"),
            "--",
            sys.executable,
            "-c",
            SPIN,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    lines = done.stderr.strip().splitlines()
    rows = {kind: float(cpu) for cpu, _, _, kind in (line.split(None, 3) for line in lines[1:-1])}
    assert rows["other python"] >= 0.4, done.stderr
    tree = float(lines[-1].split("the command's processes: ")[1].split(" s;")[0])
    assert tree >= 0.5, lines[-1]  # the kernel's count: exactly the spin's, and its start


# A child that spins and exits, left unwaited for (a zombie, its command line gone) while
# its parent sleeps on.
ZOMBIE_PARENT = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', '#spinner\\n' + sys.argv[1]])\n"
    "time.sleep(3)"
)


def test_top_lists_a_child_by_the_command_line_it_had_before_it_exited() -> None:
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "devtools" / "cpu_by_process.py"),
            "--top",
            "50",
            "--",
            sys.executable,
            "-c",
            ZOMBIE_PARENT,
            "import time\nwhile time.process_time() < 0.5: pass",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    # Every process of the machine is counted (on a busy one, another's spinner comes first).
    top = done.stderr.split("heaviest command lines")[1].splitlines()[1:-1]
    spinner = [line for line in top if "#spinner" in line]
    assert spinner and float(spinner[0].split()[0]) >= 0.4, done.stderr
