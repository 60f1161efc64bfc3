"""The checkpoint remover, run as a subprocess under the cluster's Python as the cluster runs it:
it removes what it is named inside the run directory, and nothing a link points at."""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from tests.clusters.agent_env import PYTHON

REMOVER = Path(__file__).resolve().parents[2] / "clusters" / "agent" / "checkpoint_remove.py"


def remove(root: Path | str, names: list[str]) -> tuple[int, dict[str, Any]]:
    request = json.dumps({"root": str(root), "names": names}).encode()
    proc = subprocess.run(
        [PYTHON, "-I", str(REMOVER)], input=request, capture_output=True, timeout=30, cwd="/"
    )
    return proc.returncode, json.loads(proc.stdout)


def du(path: Path) -> int:
    out = subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0])


def _run_dir(tmp_path: Path) -> tuple[Path, Path]:
    run, outside = tmp_path / "run", tmp_path / "precious"
    (run / "checkpoints" / "step-20" / "inner").mkdir(parents=True)
    outside.mkdir()
    (outside / "weights.pt").write_bytes(b"w" * 1000)
    (run / "checkpoints" / "step-10.pt").write_bytes(b"a" * 100)
    (run / "checkpoints" / "step-20" / "model.pt").write_bytes(b"b" * 200)
    (run / "checkpoints" / "step-20" / "inner" / "shard").write_bytes(b"c" * 30)
    # Links the job planted: one inside a checkpoint, one that is a checkpoint.
    (run / "checkpoints" / "step-20" / "inner" / "data").symlink_to(outside)
    (run / "checkpoints" / "step-30.pt").symlink_to(outside / "weights.pt")
    return run, outside


def test_removes_files_and_trees_and_reports_the_bytes_du_counted(tmp_path: Path) -> None:
    run, outside = _run_dir(tmp_path)
    sizes = {n: du(run / n) for n in ("checkpoints/step-10.pt", "checkpoints/step-20")}
    code, reply = remove(run, ["checkpoints/step-10.pt", "checkpoints/step-20"])
    assert code == 0 and reply["ok"]
    for name, size in sizes.items():
        assert reply["results"][name] == {"removed": True, "bytes": size, "error": None}
        assert not (run / name).exists()
    # The link inside went as a link: what it pointed at is whole.
    assert (outside / "weights.pt").read_bytes() == b"w" * 1000
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["step-30.pt"]


def test_a_checkpoint_that_is_a_link_is_left_alone_with_its_target(tmp_path: Path) -> None:
    run, outside = _run_dir(tmp_path)
    _, reply = remove(run, ["checkpoints/step-30.pt"])
    assert reply["results"]["checkpoints/step-30.pt"] == {
        "removed": False,
        "bytes": 0,
        "error": "a symbolic link: left alone",
    }
    assert (run / "checkpoints" / "step-30.pt").is_symlink()
    assert (outside / "weights.pt").read_bytes() == b"w" * 1000


def test_names_that_leave_the_run_directory_are_refused(tmp_path: Path) -> None:
    run, outside = _run_dir(tmp_path)
    # A directory on the way that is a link out: refused, not followed.
    (run / "out").symlink_to(outside)
    names = [
        "../precious/weights.pt",
        "/etc/passwd",
        "checkpoints/../../precious",
        "out/weights.pt",
    ]
    code, reply = remove(run, names)
    assert code == 0
    for name in names:
        assert reply["results"][name]["removed"] is False, name
        assert reply["results"][name]["error"], name
    assert (outside / "weights.pt").read_bytes() == b"w" * 1000
    assert reply["results"]["out/weights.pt"]["error"].endswith("not followed")


def test_a_run_directory_that_is_a_link_is_refused_whole(tmp_path: Path) -> None:
    _, outside = _run_dir(tmp_path)
    link = tmp_path / "linked-run"
    link.symlink_to(outside)
    code, reply = remove(link, ["weights.pt"])
    assert code == 2 and not reply["ok"] and "cannot open the run directory" in reply["error"]
    assert (outside / "weights.pt").exists()


def test_missing_names_and_bad_requests_are_answered(tmp_path: Path) -> None:
    run, _ = _run_dir(tmp_path)
    _, reply = remove(run, ["checkpoints/step-99.pt"])
    assert reply["results"]["checkpoints/step-99.pt"]["error"] == "not found"
    code, reply = remove("relative/path", [])
    assert code == 2 and reply == {"ok": False, "error": "'root' must be an absolute path"}
    proc = subprocess.run([PYTHON, "-I", str(REMOVER)], input=b"nope", capture_output=True)
    assert proc.returncode == 2 and json.loads(proc.stdout)["ok"] is False
    assert os.path.isdir(run / "checkpoints")
