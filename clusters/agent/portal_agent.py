#!/usr/bin/env python3
"""The portal agent: one JSON request on stdin, one JSON reply on stdout.

Sent on stdin to `python3 -I` on a cluster's login node once per poll cycle
(never stored there, so no user can replace it). It knows nothing about Slurm:
it runs the argv lists it is given (no shell), reads files from byte offsets and
lists directories. It must stay standalone, stdlib-only and runnable on Python 3.8.
"""

from __future__ import annotations  # annotations stay strings on Python 3.8

import base64
import contextlib
import fnmatch
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time
from typing import Any

VERSION = 1
MAX_OUTPUT_BYTES = 4 * 1024 * 1024
MAX_BYTES = 8 * 1024 * 1024
MAX_BYTES_PER_FILE = 1024 * 1024
MAX_ENTRIES = 10000
TIMEOUT_EXIT = 124  # what coreutils timeout(1) exits with
# A find walks at most this deep and looks at this many entries, whatever the tree holds.
MAX_FIND_DEPTH = 6
MAX_FIND_VISITS = 20000
MAX_FOUND = 200
# Directories a find never enters: tools' caches and installed packages, not a run's output.
SKIPPED_DIRS = frozenset(
    {"node_modules", "__pycache__", "site-packages", "dist-packages", "venv", "env", "wandb"}
)
# Entries a listing looks at to size its directories, all together; past it a size is a
# lower bound (`exact` false).
MAX_SIZE_VISITS = 100000
# Files a checkpoint directory's kind and completeness are read from: a distributed
# checkpoint's first shard and its `.metadata` (written last), Hugging Face's
# `trainer_state.json` (written after the weights, optimizer and RNG states).
MARKERS = ("__0_0.distcp", ".metadata", "trainer_state.json")


class BadRequest(Exception):
    pass


def _field(item: dict[str, Any], name: str, kind: Any, default: Any = None) -> Any:
    value = item.get(name, default)
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if not isinstance(value, kind) or isinstance(value, bool) or (number and value < 0):
        raise BadRequest(f"{name!r} is missing or invalid: {value!r}")
    return value


def _items(request: dict[str, Any], name: str, key: str) -> list[dict[str, Any]]:
    items = request.get(name, [])
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise BadRequest(f"{name!r} must be a list of objects")
    keys = [_field(i, key, str) for i in items]
    if len(set(keys)) != len(keys):
        raise BadRequest(f"duplicate {key!r} in {name!r}")
    return items


def _error_text(exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return "not found"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return getattr(exc, "strerror", None) or str(exc)


def _read_capped(handle: Any, cap: int) -> tuple[bytes, bool]:
    handle.seek(0)
    data = handle.read(cap + 1)
    return data[:cap], len(data) > cap


def run_command(argv: list[str], timeout: float, cap: int) -> dict[str, Any]:
    started = time.monotonic()
    timed_out = False
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            # start_new_session: a timeout kills the whole process group, not just the parent.
            proc = subprocess.Popen(  # noqa: S603 - argv comes from the portal, no shell
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True
            )
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte in argv
            return {
                "exit": 127,
                "stdout": "",
                "stderr": str(exc),
                "truncated": False,
                "timed_out": False,
                "seconds": round(time.monotonic() - started, 6),
            }
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            with contextlib.suppress(OSError):  # already gone
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = TIMEOUT_EXIT
        stdout, cut_out = _read_capped(out, cap)
        stderr, cut_err = _read_capped(err, cap)
    return {
        "exit": code,
        "stdout": stdout.decode("utf-8", "replace"),
        "stderr": stderr.decode("utf-8", "replace"),
        "truncated": cut_out or cut_err,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 6),
    }


def fair_shares(wants: list[int], budget: int) -> list[int]:
    """Max-min fair split: small requests are met in full, the rest share what is left."""
    shares = [0] * len(wants)
    order = sorted(range(len(wants)), key=lambda i: wants[i])
    for position, index in enumerate(order):
        shares[index] = min(wants[index], budget // (len(order) - position))
        budget -= shares[index]
    return shares


def read_files(files: list[dict[str, Any]], budget: int, per_file: int) -> dict[str, Any]:
    wants = []
    for item in files:
        try:
            size = os.stat(item["path"]).st_size
        except (OSError, ValueError):
            size = 0
        # A file's own limit (a small record the job rewrites) caps what it may cost.
        limit = min(per_file, item.get("limit", per_file))
        wants.append(max(0, min(size - item["offset"], limit)))
    replies = {}
    shares = fair_shares(wants, budget)
    for item, share in zip(files, shares):  # noqa: B905 - zip(strict=) needs Python 3.10
        replies[item["key"]] = read_file(item["path"], item["offset"], share)
    return replies


def read_file(path: str, offset: int, limit: int) -> dict[str, Any]:
    reply: dict[str, Any] = {"offset": offset, "data": "", "size": None, "more": False}
    reply.update(error=None, inode=None)
    try:
        # O_NONBLOCK: opening a FIFO must not hang the whole poll.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reply["error"] = _error_text(exc)
        return reply
    try:
        info = os.fstat(fd)  # of the file we opened, even if the path was replaced since
        reply["size"], reply["inode"] = info.st_size, info.st_ino
        if not stat.S_ISREG(info.st_mode):
            reply["error"] = "not a regular file"
        elif info.st_size < offset:
            reply["error"] = "truncated"
        else:
            os.lseek(fd, offset, os.SEEK_SET)
            chunks, remaining = [], limit
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
            data = b"".join(chunks)
            reply["data"] = base64.b64encode(data).decode("ascii")
            reply["more"] = offset + len(data) < info.st_size
    except OSError as exc:
        reply["error"] = _error_text(exc)
    finally:
        os.close(fd)
    return reply


def tree_size(path: str, visits: int) -> tuple[int, int, float]:
    """What `du -sb` counts below `path`: the apparent size of every entry, the directories'
    own and the links' own included, a hard-linked file once; no link followed. With the
    entries looked at (more than `visits` when they were not enough: a lower bound then)
    and the newest modification time among them."""
    total, seen, newest, stack, inodes = 0, 0, 0.0, [path], set()
    while stack:
        directory = stack.pop()
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if seen > visits:
                        return total, seen, newest
                    info = entry.stat(follow_symlinks=False)
                    newest = max(newest, info.st_mtime)
                    if info.st_nlink > 1 and not stat.S_ISDIR(info.st_mode):
                        if (info.st_dev, info.st_ino) in inodes:
                            continue
                        inodes.add((info.st_dev, info.st_ino))
                    total += info.st_size
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(entry.path)
        except OSError:
            continue  # removed while we looked, or not ours to read
    return total, seen, newest


def _entry(path: str, name: str, budget: list[int]) -> dict[str, Any]:
    """One checkpoint candidate: a link is reported as a link (its own size), never followed;
    a directory's size is its tree's (`tree_size`), its time the newest in it, and `marks`
    names the MARKERS it holds."""
    full = os.path.join(path, name)
    info = os.lstat(full)
    is_dir = stat.S_ISDIR(info.st_mode)
    entry = {"name": name, "size": info.st_size, "mtime": info.st_mtime, "is_dir": is_dir}
    entry["link"] = stat.S_ISLNK(info.st_mode)
    if is_dir:
        inner, seen, newest = tree_size(full, max(budget[0], 0))
        entry.update(size=info.st_size + inner, exact=seen <= budget[0], marks=_marks(full))
        entry["mtime"] = max(info.st_mtime, newest)
        budget[0] -= seen
    return entry


def _marks(directory: str) -> list[str]:
    marks = []
    for mark in MARKERS:
        with contextlib.suppress(OSError, ValueError):
            if stat.S_ISREG(os.lstat(os.path.join(directory, mark)).st_mode):
                marks.append(mark)
    return marks


def list_dir(path: str) -> dict[str, Any]:
    try:
        names = sorted(os.listdir(path))
    except (OSError, ValueError) as exc:
        return {"entries": [], "error": _error_text(exc), "truncated": False}
    entries, budget = [], [MAX_SIZE_VISITS]
    for name in names[:MAX_ENTRIES]:
        try:
            entries.append(_entry(path, name, budget))
        except OSError:
            continue  # removed while we looked
    return {"entries": entries, "error": None, "truncated": len(names) > MAX_ENTRIES}


def find_files(
    path: str, patterns: list[str], since: float, depth: int, visits: int, dirs: list[str]
) -> dict[str, Any]:
    """Files under `path` whose names match `patterns`, and directories whose names match
    `dirs` (sized as a listing sizes them, not entered), modified at or after `since`:
    breadth first, no links followed, hidden and package directories skipped, `visits`
    entries at most."""
    found: list[dict[str, Any]] = []
    queue, seen, truncated, budget = [(path, 0)], 0, False, [MAX_SIZE_VISITS]
    while queue and not truncated:
        directory, level = queue.pop(0)
        try:
            with os.scandir(directory) as entries:
                for entry in entries:
                    seen += 1
                    if seen > visits or len(found) >= MAX_FOUND:
                        truncated = True
                        break
                    name = entry.name
                    if name.startswith(".") or entry.is_symlink():
                        continue
                    if entry.is_dir(follow_symlinks=False) and _matches(name, dirs):
                        if entry.stat(follow_symlinks=False).st_mtime >= since:
                            found.append(_entry(directory, name, budget))
                            found[-1]["name"] = os.path.relpath(entry.path, path)
                    elif entry.is_dir(follow_symlinks=False):
                        if level + 1 < depth and name not in SKIPPED_DIRS:
                            queue.append((entry.path, level + 1))
                    elif _matches(name, patterns):
                        info = entry.stat(follow_symlinks=False)
                        if stat.S_ISREG(info.st_mode) and info.st_mtime >= since:
                            found.append(
                                {
                                    "name": os.path.relpath(entry.path, path),
                                    "size": info.st_size,
                                    "mtime": info.st_mtime,
                                    "is_dir": False,
                                }
                            )
        except OSError as exc:
            if directory == path:
                return {"entries": [], "error": _error_text(exc), "truncated": False}
    return {"entries": found, "error": None, "truncated": truncated}


def _matches(name: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


def listing(item: dict[str, Any]) -> dict[str, Any]:
    """A directory's entries, or with `patterns` or `dirs` what matches below it (a find)."""
    if not item.get("patterns") and not item.get("dirs"):
        return list_dir(item["path"])
    depth = min(item.get("depth", 1), MAX_FIND_DEPTH)
    visits = min(item.get("visits", MAX_FIND_VISITS), MAX_FIND_VISITS)
    patterns, dirs = item.get("patterns", []), item.get("dirs", [])
    return find_files(item["path"], patterns, item.get("since", 0), depth, visits, dirs)


def parse_request(raw: bytes) -> dict[str, Any]:
    """The request, checked whole before anything runs; defaults filled in."""
    try:
        request = json.loads(raw)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        raise BadRequest(f"not JSON: {exc}") from None
    if not isinstance(request, dict) or request.get("version") != VERSION:
        raise BadRequest(f"expected a JSON object with version {VERSION}")
    for command in _items(request, "commands", "id"):
        argv = command.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise BadRequest("'argv' must be a non-empty list of strings")
        command["timeout"] = _field(command, "timeout", (int, float), 20)
    for item in _items(request, "files", "key"):
        _field(item, "path", str)
        _field(item, "offset", int)
        if "limit" in item:
            _field(item, "limit", int)
    for item in _items(request, "listings", "key"):
        _field(item, "path", str)
        for name in ("patterns", "dirs"):
            patterns = item.get(name, [])
            if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
                raise BadRequest(f"{name!r} must be a list of strings")
        for name in ("depth", "visits", "since"):
            if name in item:
                _field(item, name, (int, float) if name == "since" else int)
    for name, default in (
        ("max_output_bytes", MAX_OUTPUT_BYTES),
        ("max_bytes", MAX_BYTES),
        ("max_bytes_per_file", MAX_BYTES_PER_FILE),
    ):
        request[name] = _field(request, name, int, default)
    return request


def answer(request: dict[str, Any]) -> dict[str, Any]:
    cap = request["max_output_bytes"]
    return {
        "version": VERSION,
        "time": time.time(),
        "commands": {
            c["id"]: run_command(c["argv"], c["timeout"], cap) for c in request.get("commands", [])
        },
        "files": read_files(
            request.get("files", []), request["max_bytes"], request["max_bytes_per_file"]
        ),
        "listings": {i["key"]: listing(i) for i in request.get("listings", [])},
    }


def main() -> int:
    try:
        request = parse_request(sys.stdin.buffer.read())
    except BadRequest as exc:
        sys.stdout.write(json.dumps({"version": VERSION, "error": f"bad request: {exc}"}))
        return 2
    sys.stdout.write(json.dumps(answer(request)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
