"""The agent's find: the record files a job's working tree holds, bounded whatever the tree."""

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.clusters.agent_env import AGENT
from tests.clusters.test_agent_script import OLDEST_PYTHONS, agent, poll

PATTERNS = ["events.out.tfevents.*", "metrics.csv", "trainer_state.json"]


def find(root: Path, **options: Any) -> dict[str, Any]:
    item = {"key": "k", "path": str(root), "patterns": PATTERNS, "depth": 4, **options}
    reply: dict[str, Any] = poll(listings=[item])["listings"]["k"]
    return reply


def names(reply: dict[str, Any]) -> list[str]:
    return sorted(e["name"] for e in reply["entries"])


def touch(path: Path, data: bytes = b"x", mtime: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def test_finds_the_trainers_files_below_the_root_with_their_sizes(tmp_path: Path) -> None:
    touch(tmp_path / "runs/Dec06/events.out.tfevents.1.host.2.0", b"abc")
    touch(tmp_path / "lightning_logs/version_0/metrics.csv")
    touch(tmp_path / "out/checkpoint-10/trainer_state.json")
    touch(tmp_path / "out/checkpoint-10/config.json")
    touch(tmp_path / "train.py")

    reply = find(tmp_path)

    assert reply["error"] is None and not reply["truncated"]
    assert names(reply) == [
        "lightning_logs/version_0/metrics.csv",
        "out/checkpoint-10/trainer_state.json",
        "runs/Dec06/events.out.tfevents.1.host.2.0",
    ]
    sizes = {e["name"]: e["size"] for e in reply["entries"]}
    assert sizes["runs/Dec06/events.out.tfevents.1.host.2.0"] == 3


def test_skips_old_files_hidden_and_package_directories_and_links(tmp_path: Path) -> None:
    started = time.time() - 60
    touch(tmp_path / "old/metrics.csv", mtime=started - 3600)  # an earlier run's
    touch(tmp_path / ".git/metrics.csv")
    touch(tmp_path / "node_modules/x/metrics.csv")
    touch(tmp_path / "venv/lib/site-packages/metrics.csv")
    touch(tmp_path / "__pycache__/metrics.csv")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    touch(outside / "metrics.csv")
    (tmp_path / "linked").symlink_to(outside)
    (tmp_path / "metrics.csv").symlink_to(outside / "metrics.csv")
    os.mkfifo(tmp_path / "trainer_state.json")
    touch(tmp_path / "new/metrics.csv")

    assert names(find(tmp_path, since=started)) == ["new/metrics.csv"]


def test_depth_and_visits_are_capped(tmp_path: Path) -> None:
    touch(tmp_path / "a/b/c/d/e/metrics.csv")
    touch(tmp_path / "a/metrics.csv")
    assert names(find(tmp_path, depth=2)) == ["a/metrics.csv"]

    many = tmp_path / "many"
    many.mkdir()
    for index in range(500):
        (many / f"f{index}").touch()
    touch(tmp_path / "z/metrics.csv")
    reply = find(tmp_path, visits=100)
    assert reply["truncated"] is True


def test_a_missing_root_is_an_error_not_a_failure(tmp_path: Path) -> None:
    reply = find(tmp_path / "gone")
    assert reply["error"] == "not found" and reply["entries"] == []


def test_a_plain_listing_is_unchanged(tmp_path: Path) -> None:
    touch(tmp_path / "metrics.csv")
    reply = poll(listings=[{"key": "k", "path": str(tmp_path)}])["listings"]["k"]
    assert [e["name"] for e in reply["entries"]] == ["metrics.csv"]


def test_bad_find_options_are_refused(tmp_path: Path) -> None:
    code, reply = agent(
        {"version": 1, "listings": [{"key": "k", "path": str(tmp_path), "patterns": "x"}]}
    )
    assert code == 2 and "patterns" in reply["error"]


@pytest.mark.skipif(not OLDEST_PYTHONS, reason="no Python 3.8 installed here")
def test_the_find_runs_on_python_3_8(tmp_path: Path) -> None:
    touch(tmp_path / "x/metrics.csv")
    request = {
        "version": 1,
        "listings": [{"key": "k", "path": str(tmp_path), "patterns": PATTERNS, "depth": 3}],
    }
    proc = subprocess.run(
        [str(OLDEST_PYTHONS[0]), "-I", str(AGENT)],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert names(json.loads(proc.stdout)["listings"]["k"]) == ["x/metrics.csv"]
