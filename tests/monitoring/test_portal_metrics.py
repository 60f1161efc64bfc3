import ast
import itertools
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import monitoring.on_cluster.portal_metrics

HELPER = Path(monitoring.on_cluster.portal_metrics.__file__)
PYTHON = "/usr/bin/python3"

pytestmark = pytest.mark.skipif(not Path(PYTHON).exists(), reason="needs the system Python")


def _run(tmp_path: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(HELPER, tmp_path / "portal_metrics.py")  # as the portal places it in a run dir
    return subprocess.run(
        [PYTHON, "-c", code],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", **env},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )


def _records(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rank_0_appends_one_json_line_with_time(tmp_path: Path) -> None:
    out = tmp_path / "metrics.jsonl"
    code = (
        "from portal_metrics import log\n"
        "print(log(step=10, loss=0.5, tokens=12345), log(11, loss=float('nan'), note='x'))"
    )
    result = _run(tmp_path, code, PORTAL_METRICS_FILE=str(out), RANK="0", SLURM_PROCID="3")
    assert result.stdout.split() == ["True", "True"]
    first, second = _records(out)
    assert first["step"] == 10 and first["loss"] == 0.5 and first["tokens"] == 12345.0
    assert isinstance(first["time"], float) and first["time"] > 1.7e9
    assert second["loss"] is None and "note" not in second
    assert result.stderr.count("portal_metrics:") == 1 and "'x' is not a number" in result.stderr


@pytest.mark.parametrize(
    "env", [{"RANK": "1"}, {"SLURM_PROCID": "2"}, {"RANK": "3", "SLURM_PROCID": "0"}]
)
def test_other_ranks_write_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    out = tmp_path / "metrics.jsonl"
    code = "from portal_metrics import log\nprint(log(step=1, loss=0.5), log(step=1, all_ranks=True, x=1))"
    result = _run(tmp_path, code, PORTAL_METRICS_FILE=str(out), **env)
    assert result.stdout.split() == ["False", "True"]
    assert [r["x"] for r in _records(out)] == [1.0]


def test_without_the_variable_it_does_nothing(tmp_path: Path) -> None:
    result = _run(tmp_path, "from portal_metrics import log\nprint(log(step=1, loss=0.5))")
    assert result.stdout.split() == ["False"] and result.stderr == ""
    assert list(tmp_path.glob("*.jsonl")) == []


def test_failures_warn_once_and_never_raise(tmp_path: Path) -> None:
    code = (
        "from portal_metrics import log\n"
        "results = [log(step=s, loss=0.1) for s in range(3)] + [log(step='one', loss=1)]\n"
        "print(results, 'loop finished')"
    )
    result = _run(tmp_path, code, PORTAL_METRICS_FILE=str(tmp_path / "no-such-dir" / "m.jsonl"))
    assert result.stdout.strip() == "[False, False, False, False] loop finished"
    assert result.stderr.count("portal_metrics:") == 1
    assert "could not write metrics" in result.stderr and "No such file" in result.stderr


def test_two_processes_appending_at_once_write_only_whole_lines(tmp_path: Path) -> None:
    out = tmp_path / "metrics.jsonl"
    shutil.copy(HELPER, tmp_path / "portal_metrics.py")
    code = (
        "import os, sys, time\nfrom portal_metrics import log\n"
        "tag = float(sys.argv[1])\n"
        "while not os.path.exists('go'):\n"
        "    time.sleep(0.001)\n"
        "for s in range(2000):\n"
        "    log(step=s, writer=tag, **{f'metric_{i}': s + i / 7 for i in range(40)})\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PORTAL_METRICS_FILE": str(out), "RANK": "0"}
    writers = [
        subprocess.Popen([PYTHON, "-c", code, str(n)], cwd=tmp_path, env=env) for n in (1, 2)
    ]
    (tmp_path / "go").touch()  # both start writing at once
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    records = _records(out)  # any torn or interleaved line fails json.loads here
    assert len(records) == 4000
    for writer in (1.0, 2.0):
        assert [r["step"] for r in records if r["writer"] == writer] == list(range(2000))
    switches = sum(a["writer"] != b["writer"] for a, b in itertools.pairwise(records))
    assert switches > 1, "the writers did not overlap, so the test proved nothing"


def test_the_helper_is_python_3_8_syntax_and_standard_library_only() -> None:
    tree = ast.parse(HELPER.read_text(), feature_version=(3, 8))
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in (
            node.names if isinstance(node, ast.Import) else [ast.alias(node.module or "")]
        )
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
