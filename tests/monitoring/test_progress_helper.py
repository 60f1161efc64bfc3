"""portal_metrics' heartbeat, declared pauses and stack dumps, in the system Python as a job runs it."""

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

import monitoring.on_cluster.portal_metrics
import monitoring.on_cluster.portal_sitecustomize
from monitoring.hangs.heartbeats import HEARTBEAT_READ, parse_heartbeat
from monitoring.hangs.stacks import stack_text

HELPER = Path(monitoring.on_cluster.portal_metrics.__file__)
SITECUSTOMIZE = Path(monitoring.on_cluster.portal_sitecustomize.__file__)
PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(not Path(PYTHON).exists(), reason="needs the system Python")


def _run(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    # As the portal places them in a run directory, which the batch script puts on PYTHONPATH.
    shutil.copy(HELPER, tmp_path / "portal_metrics.py")
    shutil.copy(SITECUSTOMIZE, tmp_path / "sitecustomize.py")
    return subprocess.run(
        [PYTHON, "-c", code],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def test_heartbeat_rewrites_one_fixed_size_record_per_rank(tmp_path: Path) -> None:
    progress = tmp_path / "progress"
    code = (
        "import portal_metrics as m\n"
        "print(all(m.heartbeat(s) for s in range(1, 1001)))\n"
        "with m.pause('checkpoint'):\n"
        "    print(open(m.os.path.join(m.os.environ['PORTAL_PROGRESS_DIR'], 'rank-3.json')).read())\n"
    )
    before = time.time()
    out = _run(tmp_path, code, PORTAL_PROGRESS_DIR=str(progress), RANK="3", SLURMD_NODENAME="n2")
    lines = out.stdout.splitlines()
    assert lines[0] == "True"
    during = json.loads(lines[1])  # written on entering the pause
    assert during["pause"] == "checkpoint" and during["step"] == 1000
    raw = (progress / "rank-3.json").read_bytes()
    assert len(raw) == 512 and raw.endswith(b"\n")  # never grows, whatever the step count
    after = parse_heartbeat(raw.strip(), rank=3, now=time.time())
    assert after is not None
    assert (after.rank, after.node, after.step, after.pause) == (3, "n2", 1000, "")
    assert after.step_at is not None and after.step_at >= before
    assert after.resumed_at is not None and after.resumed_at >= after.step_at  # pause ended
    assert len(raw) <= HEARTBEAT_READ
    assert not list(progress.glob("rank-0*"))  # only its own rank's file


def test_the_record_keeps_the_total_of_every_declared_pause_not_only_the_last(
    tmp_path: Path,
) -> None:
    """Three pauses, one nested in another (it is one pause): the total is the two outer ones."""
    progress = tmp_path / "progress"
    code = (
        "import json, os, time, portal_metrics as m\n"
        "path = os.path.join(os.environ['PORTAL_PROGRESS_DIR'], 'rank-0.json')\n"
        "m.heartbeat(1)\n"
        "spans = []\n"
        "for name in ('checkpoint', 'evaluation'):\n"
        "    with m.pause(name):\n"
        "        with m.pause('inner'):\n"
        "            time.sleep(0.05)\n"
        "        since = json.loads(open(path).read())['pause_since']\n"
        "    spans.append(json.loads(open(path).read())['resumed'] - since)\n"
        "    m.heartbeat(2)\n"
        "print(json.dumps(spans))\n"
    )
    out = _run(tmp_path, code, PORTAL_PROGRESS_DIR=str(progress), RANK="0")
    spans = json.loads(out.stdout)
    raw = (progress / "rank-0.json").read_bytes()
    found = parse_heartbeat(raw.strip(), rank=0, now=time.time())
    assert found is not None and found.pause == ""
    assert len(spans) == 2 and all(span > 0 for span in spans)
    assert found.paused == pytest.approx(sum(spans), abs=0.002)  # both, rounded to 1 ms


def test_heartbeat_is_silent_outside_the_portal_and_never_raises(tmp_path: Path) -> None:
    code = (
        "import portal_metrics as m\n"
        "print(m.heartbeat(1), m.heartbeat('x'))\n"
        "with m.pause():\n"
        "    pass\n"
        "try:\n"
        "    with m.pause('eval'):\n"
        "        raise KeyError('mine')\n"
        "except KeyError:\n"
        "    print('body error kept')\n"
    )
    assert _run(tmp_path, code).stdout.split() == ["False", "False", "body", "error", "kept"]
    # A directory it cannot create: one warning on stderr, False, the loop goes on.
    (tmp_path / "file").write_text("")
    out = _run(tmp_path, code, PORTAL_PROGRESS_DIR=str(tmp_path / "file" / "progress"))
    assert out.stdout.split()[:2] == ["False", "False"]
    assert out.stderr.count("portal_metrics:") == 1


def test_the_ticker_keeps_alive_fresh_while_the_main_thread_waits(tmp_path: Path) -> None:
    progress = tmp_path / "progress"
    code = "import portal_metrics as m, time\nm.heartbeat(7)\ntime.sleep(2.5)\n"
    _run(tmp_path, code, PORTAL_PROGRESS_DIR=str(progress), RANK="0")
    record = json.loads((progress / "rank-0.json").read_text())
    # The step's time stays; the heartbeat thread's tick moved on while the step waited.
    assert record["step"] == 7 and record["alive"] - record["step_time"] >= 1.0


def test_the_sitecustomize_dumps_every_thread_on_the_stack_signal(tmp_path: Path) -> None:
    stacks = tmp_path / "stacks"
    code = (
        "import os, signal, threading, time\n"
        "def waiting_for_peers():\n"
        "    time.sleep(30)\n"
        "threading.Thread(target=waiting_for_peers, daemon=True).start()\n"
        "time.sleep(0.2)\n"
        "os.kill(os.getpid(), signal.SIGUSR2)\n"
        "time.sleep(0.2)\n"
        "print('alive')\n"
    )
    env = {"PORTAL_STACKS_DIR": str(stacks), "PORTAL_STACK_SIGNAL": "USR2"}
    out = _run(tmp_path, code, RANK="1", **env)
    assert out.stdout.strip() == "alive"  # the signal dumped, it did not kill
    text = stack_text((stacks / "rank-1.txt").read_bytes())
    assert text.startswith("# rank 1 pid ")
    assert "waiting_for_peers" in text and "most recent call first" in text
    # torchrun itself (PORTAL_LAUNCHER, no RANK) writes no file of its own.
    _run(tmp_path, "print(1)", PORTAL_LAUNCHER="torchrun", SLURM_PROCID="0", **env)
    assert sorted(p.name for p in stacks.iterdir()) == ["rank-1.txt"]
