"""Packing a code directory (portal_client.packing): which files, same bytes, the size cap."""

import io
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
from portal_client.packing import PackError, pack


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def _names(data: bytes) -> list[str]:
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        return archive.getnames()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "trainer").mkdir(parents=True)
    (repo / "trainer" / "__init__.py").write_text("")
    (repo / "trainer" / "main.py").write_text("print('v1')\n")
    (repo / ".gitignore").write_text("data/\n*.ckpt\n")
    (repo / "data").mkdir()
    (repo / "data" / "big.bin").write_bytes(b"x" * 1000)
    (repo / "model.ckpt").write_bytes(b"weights")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "first")
    return repo


def test_a_git_checkout_sends_what_git_keeps_with_its_commit_and_diff(repo: Path) -> None:
    (repo / "trainer" / "main.py").write_text("print('v2')\n")  # uncommitted
    (repo / "notes.txt").write_text("untracked, not ignored\n")
    packed = pack(repo)
    assert _names(packed.data) == [
        ".gitignore",
        "notes.txt",
        "trainer/__init__.py",
        "trainer/main.py",
    ]
    assert packed.git is not None
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert (packed.git.commit, packed.git.branch) == (head, "main")
    assert "-print('v1')" in packed.git.diff and "+print('v2')" in packed.git.diff
    assert not packed.git.diff_truncated
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as archive:
        member = archive.extractfile("trainer/main.py")
        assert member is not None and member.read() == b"print('v2')\n"


def test_the_same_files_give_the_same_bytes(repo: Path) -> None:
    first = pack(repo)
    os.utime(repo / "trainer" / "main.py", (1, 1))  # a new mtime changes nothing
    second = pack(repo)
    assert (first.sha256, first.data) == (second.sha256, second.data)
    (repo / "trainer" / "main.py").write_text("print('v3')\n")
    assert pack(repo).sha256 != first.sha256


def test_outside_git_the_gitignore_files_still_apply(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / "src" / "cache").mkdir(parents=True)
    (code / ".gitignore").write_text("*.log\n!keep.log\n")
    (code / "src" / ".gitignore").write_text("cache/\n")
    (code / "run.log").write_text("x")
    (code / "keep.log").write_text("x")
    (code / "src" / "train.py").write_text("x")
    (code / "src" / "cache" / "a.bin").write_text("x")
    (code / "src" / "link").symlink_to("train.py")
    packed = pack(code)
    assert packed.git is None
    assert _names(packed.data) == [
        ".gitignore",
        "keep.log",
        "src/.gitignore",
        "src/link",
        "src/train.py",
    ]


def test_notebook_checkpoints_and_python_caches_stay_out_in_git_or_not(
    repo: Path, tmp_path: Path
) -> None:
    """As the portal's pack of a session's directory leaves them out (jobs.code.cluster_dir)."""
    plain = tmp_path / "plain"
    for root in (repo, plain):
        (root / ".ipynb_checkpoints").mkdir(parents=True)
        (root / ".ipynb_checkpoints" / "analysis-checkpoint.ipynb").write_text("{}\n")
        (root / "pkg" / "__pycache__").mkdir(parents=True)
        (root / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"x")
        (root / "pkg" / "model.py").write_text("WIDTH = 8\n")
    assert "pkg/model.py" in _names(pack(repo).data)
    assert not [n for n in _names(pack(repo).data) if "checkpoint" in n or "pycache" in n]
    assert _names(pack(plain).data) == ["pkg/model.py"]


def test_over_the_cap_it_names_the_cap_and_the_largest_files(repo: Path) -> None:
    (repo / "weights.pt").write_bytes(b"w" * 3000)
    (repo / "vocab.json").write_bytes(b"v" * 2000)
    with pytest.raises(PackError) as refused:
        pack(repo, max_bytes=4096)
    message = str(refused.value)
    assert "over the cap of 4.0 KB" in message
    assert "Largest files: weights.pt (2.9 KB), vocab.json (2.0 KB)" in message
    assert ".gitignore" in message


def test_not_a_directory_is_named(tmp_path: Path) -> None:
    with pytest.raises(PackError, match="not a directory"):
        pack(tmp_path / "missing")
