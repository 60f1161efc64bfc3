"""The portal agent, run as a subprocess under the system Python exactly as a cluster runs it."""

import ast
import base64
import json
import os
import resource
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from clusters.agent.portal_agent import fair_shares
from tests.clusters.agent_env import AGENT, PYTHON

OLDEST_PYTHONS = sorted(Path.home().glob(".pyenv/versions/3.8*/bin/python3.8"))
MiB = 1024 * 1024
MEMORY_LIMIT = 128 * MiB  # address space, generous for a 1 MiB read


def agent(request: Any, *, prefix: tuple[str, ...] = ()) -> tuple[int, dict[str, Any]]:
    raw = request if isinstance(request, bytes) else json.dumps(request).encode()
    proc = subprocess.run(
        [*prefix, PYTHON, str(AGENT)], input=raw, capture_output=True, timeout=30, cwd="/"
    )
    # Exactly one JSON document on stdout, nothing else.
    assert proc.stdout.count(b"\n") == 0, proc.stdout[:200]
    return proc.returncode, json.loads(proc.stdout)


def poll(**parts: Any) -> dict[str, Any]:
    code, reply = agent({"version": 1, **parts})
    assert code == 0, reply
    return reply


def read(path: Path, offset: int = 0, key: str = "f", **caps: int) -> dict[str, Any]:
    return poll(files=[{"key": key, "path": str(path), "offset": offset}], **caps)["files"][key]


def data(chunk: dict[str, Any]) -> bytes:
    return base64.b64decode(chunk["data"])


def test_the_script_parses_as_python_3_8() -> None:
    ast.parse(AGENT.read_text(), feature_version=(3, 8))


@pytest.mark.skipif(not OLDEST_PYTHONS, reason="no Python 3.8 installed here")
def test_runs_on_python_3_8(tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"\x00old\rnew")
    request = {
        "version": 1,
        "commands": [{"id": "echo", "argv": ["echo", "hi"]}, {"id": "gone", "argv": ["nope"]}],
        "files": [{"key": "log", "path": str(tmp_path / "log"), "offset": 1}],
        "listings": [{"key": "dir", "path": str(tmp_path)}],
    }
    proc = subprocess.run(
        [str(OLDEST_PYTHONS[0]), "-I", str(AGENT)],
        input=json.dumps(request).encode(),
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    reply = json.loads(proc.stdout)
    assert (
        reply["commands"]["echo"]["stdout"] == "hi\n" and reply["commands"]["gone"]["exit"] == 127
    )
    assert data(reply["files"]["log"]) == b"old\rnew"
    assert [e["name"] for e in reply["listings"]["dir"]["entries"]] == ["log"]


def test_reads_new_bytes_from_the_offset_over_two_cycles(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_bytes(b"step 1 loss 2.5\n")
    first = read(log)
    assert data(first) == b"step 1 loss 2.5\n"
    assert first["offset"] == 0 and first["size"] == 16 and first["more"] is False
    assert first["error"] is None and first["inode"] == log.stat().st_ino

    with log.open("ab") as handle:
        handle.write(b"step 2 loss 2.1\nstep 3 lo")
    second = read(log, offset=16)
    assert data(second) == b"step 2 loss 2.1\nstep 3 lo"
    assert second["offset"] == 16 and second["size"] == 41
    assert data(read(log, offset=41)) == b""


def test_bytes_round_trip_exactly(tmp_path: Path) -> None:
    payload = bytes(range(256)) + b"\x00\x00\xff\xfe\xc3(epoch 1 10%\r50%\r100%\r\n\xe2\x82"
    blob = tmp_path / "binary.log"
    blob.write_bytes(payload)
    assert data(read(blob)) == payload
    assert data(read(blob, offset=250)) == payload[250:]


def test_per_file_cap_leaves_the_rest_for_the_next_cycle(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_bytes(bytes(range(100)))
    chunk = read(log, max_bytes_per_file=30)
    assert data(chunk) == bytes(range(30)) and chunk["more"] is True and chunk["size"] == 100
    assert data(read(log, offset=90, max_bytes_per_file=30)) == bytes(range(90, 100))


def test_files_share_the_reply_budget_fairly(tmp_path: Path) -> None:
    sizes = {"quiet": 100, "loud": 10_000, "louder": 50_000, "done": 0}
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
    files = [{"key": name, "path": str(tmp_path / name), "offset": 0} for name in sizes]
    reply = poll(files=files, max_bytes=3000, max_bytes_per_file=MiB)["files"]
    # The quiet log gets all it has; the two loud ones split the rest evenly.
    assert {k: len(data(v)) for k, v in reply.items()} == {
        "quiet": 100,
        "loud": 1450,
        "louder": 1450,
        "done": 0,
    }
    assert [reply[k]["more"] for k in sizes] == [False, True, True, False]


def test_a_files_own_limit_caps_what_a_hostile_file_costs(tmp_path: Path) -> None:
    # A job's heartbeat record should be 512 bytes; a hostile one is 1 MiB.
    (tmp_path / "rank-0.json").write_bytes(b"{" * MiB)
    (tmp_path / "stdout.log").write_bytes(b"y" * 5000)
    files = [
        {"key": "beat", "path": str(tmp_path / "rank-0.json"), "offset": 0, "limit": 1024},
        {"key": "log", "path": str(tmp_path / "stdout.log"), "offset": 0},
    ]
    reply = poll(files=files, max_bytes=7000, max_bytes_per_file=MiB)["files"]
    assert len(data(reply["beat"])) == 1024 and reply["beat"]["more"] is True
    assert len(data(reply["log"])) == 5000  # the log is not starved by it
    code, refused = agent({"version": 1, "files": [{**files[0], "limit": -1}]})
    assert code == 2 and "'limit' is missing or invalid" in refused["error"]


@pytest.mark.parametrize(
    ("wants", "budget", "shares"),
    [
        ([10, 10, 10], 100, [10, 10, 10]),
        ([1000, 5, 1000], 105, [50, 5, 50]),
        ([7, 7, 7], 20, [6, 7, 7]),  # never more than the budget
        ([], 100, []),
        ([5, 5], 0, [0, 0]),
    ],
)
def test_fair_shares(wants: list[int], budget: int, shares: list[int]) -> None:
    assert sorted(fair_shares(wants, budget)) == sorted(shares)
    assert sum(fair_shares(wants, budget)) <= budget


def test_a_huge_line_is_capped(tmp_path: Path) -> None:
    line = tmp_path / "progress.log"
    line.write_bytes(b"#" * (10 * MiB))  # a progress bar without a newline
    chunk = read(line, max_bytes=8 * MiB, max_bytes_per_file=MiB)
    assert data(chunk) == b"#" * MiB and chunk["more"] is True and chunk["size"] == 10 * MiB


def test_memory_stays_bounded_however_big_the_file(tmp_path: Path) -> None:
    sparse = tmp_path / "sparse.log"
    with sparse.open("wb") as handle:
        handle.truncate(4 * 1024 * MiB)  # 4 GiB of zeros, nothing on disk

    def limit_memory() -> None:  # loading the file whole would need 4 GiB
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    request = {"version": 1, "files": [{"key": "s", "path": str(sparse), "offset": 7}]}
    proc = subprocess.run(
        [PYTHON, str(AGENT)],
        input=json.dumps(request).encode(),
        capture_output=True,
        preexec_fn=limit_memory,
        cwd="/",
        timeout=30,
    )
    assert proc.returncode == 0, proc.stderr
    chunk = json.loads(proc.stdout)["files"]["s"]
    assert data(chunk) == bytes(MiB) and chunk["more"] is True


def test_missing_file_is_reported_per_file(tmp_path: Path) -> None:
    present = tmp_path / "present.log"
    present.write_bytes(b"hi")
    reply = poll(
        files=[
            {"key": "pending", "path": str(tmp_path / "not-started" / "stdout.log"), "offset": 0},
            {"key": "present", "path": str(present), "offset": 0},
        ]
    )["files"]
    assert reply["pending"] == {
        "offset": 0,
        "data": "",
        "size": None,
        "more": False,
        "error": "not found",
        "inode": None,
    }
    assert data(reply["present"]) == b"hi"


def test_a_file_shorter_than_the_offset_is_reported_truncated(tmp_path: Path) -> None:
    log = tmp_path / "stdout.log"
    log.write_bytes(b"x" * 500)
    old_inode = log.stat().st_ino
    replacement = tmp_path / "new.log"
    replacement.write_bytes(b"y" * 100)
    replacement.replace(log)  # the job was restarted and wrote a new log
    chunk = read(log, offset=500)
    assert chunk["error"] == "truncated" and chunk["size"] == 100 and chunk["data"] == ""
    assert chunk["inode"] == log.stat().st_ino != old_inode


def test_a_directory_or_fifo_is_not_read(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read(fifo)["error"] == "not a regular file"  # and did not hang
    assert read(tmp_path)["error"] == "not a regular file"


def test_permission_denied_is_per_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        (tmp_path / "private").mkdir()
        (tmp_path / "private" / "stdout.log").write_bytes(b"secret")
        (tmp_path / "private" / "stdout.log").chmod(0)
        (tmp_path / "public.log").write_bytes(b"ok")
        _check_permission_denied(tmp_path, prefix=())
        return
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run the agent as nobody")
    # Root reads everything: run the agent as nobody, in a tree nobody can traverse
    # (pytest's tmp_path sits in a root-only directory).
    shared = Path(tempfile.mkdtemp(prefix="agent-perm-", dir="/tmp"))
    try:
        shared.chmod(0o755)
        (shared / "private").mkdir(mode=0o700)
        (shared / "private" / "stdout.log").write_bytes(b"secret")
        (shared / "public.log").write_bytes(b"ok")
        (shared / "public.log").chmod(0o644)
        _check_permission_denied(
            shared, prefix=("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
        )
    finally:
        shutil.rmtree(shared)


def _check_permission_denied(root: Path, *, prefix: tuple[str, ...]) -> None:
    files = [
        {"key": "secret", "path": str(root / "private" / "stdout.log"), "offset": 0},
        {"key": "public", "path": str(root / "public.log"), "offset": 0},
    ]
    listings = [{"key": "private", "path": str(root / "private")}]
    code, reply = agent({"version": 1, "files": files, "listings": listings}, prefix=prefix)
    assert code == 0
    assert reply["files"]["secret"]["error"] == "permission denied"
    assert data(reply["files"]["public"]) == b"ok"
    if prefix:  # a non-root owner can still list its own directory
        assert reply["listings"]["private"]["error"] == "permission denied"


def test_commands_run_in_order_without_a_shell(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    commands = [
        {"id": "write", "argv": ["sh", "-c", f"echo first > {marker}; echo err >&2; exit 3"]},
        {"id": "read", "argv": ["cat", str(marker)]},
        {"id": "literal", "argv": ["echo", "$HOME; rm -rf / `id`"]},
        {"id": "bytes", "argv": ["printf", "ok \\377\\000 done"]},
    ]
    reply = poll(commands=commands)["commands"]
    assert reply["write"]["exit"] == 3 and reply["write"]["stderr"] == "err\n"
    assert reply["read"]["exit"] == 0 and reply["read"]["stdout"] == "first\n"
    assert reply["literal"]["stdout"] == "$HOME; rm -rf / `id`\n"
    assert reply["bytes"]["stdout"] == "ok \ufffd\x00 done"
    assert all(r["truncated"] is False and r["timed_out"] is False for r in reply.values())
    assert list(reply) == ["write", "read", "literal", "bytes"]


def test_a_missing_binary_exits_127_without_crashing_the_agent() -> None:
    reply = poll(
        commands=[
            {"id": "sacct", "argv": ["no-such-sacct", "-j", "1"]},
            {"id": "echo", "argv": ["echo", "still here"]},
        ]
    )["commands"]
    assert reply["sacct"]["exit"] == 127 and "no-such-sacct" in reply["sacct"]["stderr"]
    assert reply["echo"]["stdout"] == "still here\n"


def test_a_command_past_its_timeout_is_killed_with_its_children() -> None:
    reply = poll(
        commands=[{"id": "hang", "argv": ["sh", "-c", "sleep 30 & echo $!; wait"], "timeout": 0.5}]
    )["commands"]["hang"]
    assert reply["timed_out"] is True and reply["exit"] == 124
    grandchild = Path(f"/proc/{int(reply['stdout'])}/stat")
    deadline = time.monotonic() + 2
    while grandchild.exists() and time.monotonic() < deadline:
        if grandchild.read_text().split(")")[-1].split()[0] == "Z":
            break  # dead, waiting for its reaper
        time.sleep(0.05)
    else:
        assert not grandchild.exists(), "the timed-out command's child still runs"


def test_command_output_is_capped() -> None:
    reply = poll(
        commands=[{"id": "big", "argv": ["head", "-c", "100000", "/dev/zero"]}],
        max_output_bytes=1000,
    )["commands"]["big"]
    assert reply["truncated"] is True and reply["stdout"] == "\x00" * 1000


def _du(path: Path) -> int:
    return int(
        subprocess.run(["du", "-sb", str(path)], capture_output=True, text=True).stdout.split()[0]
    )


def test_listing_sizes_each_entry_as_du_counts_it_and_follows_no_link(tmp_path: Path) -> None:
    checkpoints = tmp_path / "checkpoints"
    (checkpoints / "step_200" / "shards").mkdir(parents=True)
    (checkpoints / "step_200" / "model.pt").write_bytes(b"m" * 300)
    (checkpoints / "step_200" / "shards" / "__0_0.distcp").write_bytes(b"o" * 40)
    (checkpoints / "step_200" / "trainer_state.json").write_bytes(b"{}")
    os.link(checkpoints / "step_200" / "model.pt", checkpoints / "step_200" / "model-again.pt")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big.bin").write_bytes(b"x" * 100_000)
    # Links the job made, inside a checkpoint and as one: counted as links, never followed.
    (checkpoints / "step_200" / "data").symlink_to(outside)
    (checkpoints / "step-999.pt").symlink_to(outside / "big.bin")
    (checkpoints / "latest.pt").write_bytes(b"l" * 12)
    reply = poll(
        listings=[
            {"key": "ckpt", "path": str(checkpoints)},
            {"key": "none", "path": str(tmp_path / "missing")},
        ]
    )["listings"]
    entries = {e["name"]: e for e in reply["ckpt"]["entries"]}
    assert sorted(entries) == ["latest.pt", "step-999.pt", "step_200"]
    for name, entry in entries.items():
        assert entry["size"] == _du(checkpoints / name), name
    assert entries["step_200"]["is_dir"] and entries["step_200"]["exact"]
    assert entries["step_200"]["marks"] == ["trainer_state.json"]
    assert entries["step-999.pt"]["link"] and entries["step-999.pt"]["size"] < 1000
    assert not entries["latest.pt"]["link"] and entries["latest.pt"]["size"] == 12
    assert abs(entries["latest.pt"]["mtime"] - (checkpoints / "latest.pt").stat().st_mtime) < 1e-3
    assert reply["ckpt"]["error"] is None and reply["none"]["error"] == "not found"


def test_a_find_sizes_matching_directories_without_entering_them(tmp_path: Path) -> None:
    out = tmp_path / "code" / "out"
    (out / "checkpoint-40").mkdir(parents=True)
    (out / "checkpoint-40" / "model.safetensors").write_bytes(b"w" * 500)
    (out / "checkpoint-40" / "checkpoint-0.pt").write_bytes(b"n" * 5)  # inside: not found
    logs = tmp_path / "code" / "lightning_logs" / "version_0" / "checkpoints"
    logs.mkdir(parents=True)
    (logs / "epoch=0-step=50.ckpt").write_bytes(b"c" * 70)
    reply = poll(
        listings=[
            {
                "key": "found",
                "path": str(tmp_path / "code"),
                "patterns": ["*.ckpt", "checkpoint*.pt"],
                "dirs": ["checkpoint-*"],
                "depth": 5,
            }
        ]
    )["listings"]["found"]
    found = {e["name"]: e for e in reply["entries"]}
    assert sorted(found) == [
        "lightning_logs/version_0/checkpoints/epoch=0-step=50.ckpt",
        "out/checkpoint-40",
    ]
    assert found["out/checkpoint-40"]["size"] == _du(out / "checkpoint-40")
    assert found["out/checkpoint-40"]["is_dir"] and found["out/checkpoint-40"]["marks"] == []


@pytest.mark.parametrize(
    "request_body",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        {"version": 2},
        {"version": 1, "files": [{"key": "a", "path": "/x", "offset": -1}]},
        {"version": 1, "files": [{"key": "a", "path": "/x", "offset": True}]},
        {"version": 1, "files": [{"key": "a", "path": "/x"}, {"key": "a", "path": "/y"}]},
        {"version": 1, "commands": [{"id": "x", "argv": []}]},
        {"version": 1, "commands": [{"id": "x", "argv": ["echo", 3]}]},
        {"version": 1, "commands": [{"id": "x", "argv": ["echo"], "timeout": "soon"}]},
        {"version": 1, "max_bytes": "lots"},
        {"version": 1, "listings": "everything"},
    ],
)
def test_a_malformed_request_is_refused_with_exit_2(request_body: Any, tmp_path: Path) -> None:
    code, reply = agent(request_body)
    assert code == 2
    assert set(reply) == {"version", "error"} and reply["error"].startswith("bad request")


# The portal side, over a local stand-in for the SSH connection: same commands, same bytes.
