"""The safe unpacker (clusters/agent/code_unpack.py): what it refuses, and what it writes.

Archives are built here with tarfile, member by member, as a hostile uploader
would craft them; the same function checks an upload on the portal and unpacks
it on the cluster.
"""

import ast
import io
import json
import os
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

from clusters.agent.code_unpack import UnsafeArchive, check_archive, main, unpack

CAPS = {"max_bytes": 10_000, "max_files": 20}


def _archive(path: Path, *members: tuple[str, str, str | bytes]) -> str:
    """members: (kind, name, content or link target); kind is file, dir, sym, hard, fifo, chr."""
    with tarfile.open(path, "w:gz") as archive:
        for kind, name, value in members:
            info = tarfile.TarInfo(name)
            data = None
            if kind == "file":
                payload = value if isinstance(value, bytes) else value.encode()
                info.size, info.mode, data = len(payload), 0o755, io.BytesIO(payload)
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
            elif kind in ("sym", "hard"):
                info.type = tarfile.SYMTYPE if kind == "sym" else tarfile.LNKTYPE
                info.linkname = str(value)
            else:
                info.type = tarfile.FIFOTYPE if kind == "fifo" else tarfile.CHRTYPE
            archive.addfile(info, data)
    return str(path)


@pytest.mark.parametrize(
    ("members", "says"),
    [
        ([("file", "../x", "evil")], "'..' component"),
        ([("file", "src/../../x", "evil")], "'..' component"),
        ([("file", "/etc/cron.d/x", "evil")], "absolute path"),
        ([("sym", "escape", "../../etc")], "points out of the directory"),
        ([("sym", "escape", "/etc/passwd")], "absolute"),
        ([("sym", "deep/l", "../../x")], "points out of the directory"),
        # The link is harmless alone; writing through it is not.
        ([("sym", "l", "sub"), ("file", "l/x", "evil")], "under the link 'l'"),
        # `up/..` is the root lexically, its parent physically.
        ([("dir", "p", ""), ("sym", "p/q", ".."), ("sym", "a", "p/q/../x")], "another link"),
        ([("file", "a", "x"), ("hard", "b", "/etc/shadow")], "hard links"),
        ([("fifo", "pipe", "")], "FIFO"),
        ([("chr", "dev", "")], "device"),
        ([("file", "a", "1"), ("file", "./a", "2")], "appears twice"),
        ([("file", f"f{i}", "x") for i in range(21)], "over the cap of 20 files"),
        ([("file", "big", b"x" * 10_001)], "cap of 10000 bytes"),
    ],
)
def test_an_archive_that_could_leave_its_directory_is_refused(tmp_path, members, says) -> None:
    path = _archive(tmp_path / "code.tar.gz", *members)
    with pytest.raises(UnsafeArchive, match=says):
        check_archive(path, **CAPS)
    with pytest.raises(UnsafeArchive, match=says):
        unpack(path, str(tmp_path / "out"), **CAPS)
    outside = {p.name for p in tmp_path.iterdir()}
    assert outside <= {"code.tar.gz", "out"}, "nothing lands beside the directory"


def test_a_plain_tree_unpacks_with_links_inside_kept(tmp_path) -> None:
    path = _archive(
        tmp_path / "code.tar.gz",
        ("dir", "./", ""),
        ("file", "pkg/train.py", "print('hi')\n"),
        ("file", "pkg/__init__.py", ""),
        ("sym", "pkg/current.py", "train.py"),
        ("sym", "top", "pkg"),
    )
    assert check_archive(path, **CAPS) == {"files": 2, "bytes": 12}
    out = tmp_path / "out"
    assert unpack(path, str(out), **CAPS) == {"files": 2, "bytes": 12}
    assert (out / "pkg" / "train.py").read_text() == "print('hi')\n"
    assert os.readlink(out / "pkg" / "current.py") == "train.py"
    assert (out / "top" / "current.py").read_text() == "print('hi')\n"
    # Execute bit kept, setuid and group/other write never.
    assert stat.S_IMODE((out / "pkg" / "train.py").stat().st_mode) == 0o755


def test_it_unpacks_only_into_an_empty_directory(tmp_path) -> None:
    path = _archive(tmp_path / "code.tar.gz", ("file", "a", "1"))
    out = tmp_path / "out"
    out.mkdir()
    (out / "left-over").write_text("x")
    with pytest.raises(UnsafeArchive, match="not empty"):
        unpack(path, str(out), **CAPS)


def test_not_a_tar_archive_is_named(tmp_path) -> None:
    path = tmp_path / "code.zip"
    path.write_bytes(b"PK\x03\x04 not a tar")
    with pytest.raises(UnsafeArchive, match="not a tar archive"):
        check_archive(str(path), **CAPS)


def test_the_script_answers_one_json_line_and_removes_the_archive(tmp_path) -> None:
    good = _archive(tmp_path / "good.tar.gz", ("file", "a.py", "x = 1\n"))
    request = {"archive": good, "dest": str(tmp_path / "code"), **CAPS}
    out = io.StringIO()
    assert main(io.BytesIO(json.dumps(request).encode()), out) == 0
    assert json.loads(out.getvalue()) == {"ok": True, "files": 1, "bytes": 6}
    assert not Path(good).exists()

    bad = _archive(tmp_path / "bad.tar.gz", ("file", "../x", "evil"))
    request = {"archive": bad, "dest": str(tmp_path / "code2"), **CAPS}
    out = io.StringIO()
    assert main(io.BytesIO(json.dumps(request).encode()), out) == 1
    reply = json.loads(out.getvalue())
    assert reply["ok"] is False and "'..' component" in reply["error"]


SCRIPT = Path(__file__).resolve().parents[2] / "clusters" / "agent" / "code_unpack.py"
OLDEST_PYTHONS = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))


def test_the_script_parses_as_python_3_8() -> None:
    ast.parse(SCRIPT.read_text(), feature_version=(3, 8))


@pytest.mark.skipif(not OLDEST_PYTHONS, reason="no Python 3.8 installed here")
def test_runs_on_python_3_8(tmp_path) -> None:
    good = _archive(tmp_path / "good.tar.gz", ("file", "a.py", "x = 1\n"))
    request = {"archive": good, "dest": str(tmp_path / "code"), **CAPS}
    proc = subprocess.run(
        [str(OLDEST_PYTHONS[0]), "-I", str(SCRIPT)],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"ok": True, "files": 1, "bytes": 6}
