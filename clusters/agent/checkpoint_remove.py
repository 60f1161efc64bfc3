#!/usr/bin/env python3
"""Removes checkpoints inside one run directory: one JSON request on stdin, one reply on stdout.

Sent like the agent (`clusters.agent.removal`) to an isolated interpreter under the job's
own account, so it can remove only what that account may. It never leaves the run
directory: names are relative, `..` and absolute names are refused, every directory on
the way is opened relative to the one before with O_NOFOLLOW (a link on the way is
refused, whatever it points at), a checkpoint that is itself a link is left alone, and a
directory is emptied through file descriptors, removing the links inside it as links
(what they point at is never touched). Stdlib only, runnable on Python 3.8.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from typing import Any

MAX_NAMES = 1000
MAX_DEPTH = 64  # directories inside a checkpoint; deeper is refused, not followed
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)


class Refused(Exception):
    pass


def _parts(name: str) -> list[str]:
    parts = name.split("/")
    if not name or "\0" in name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise Refused(f"not a plain name inside the run directory: {name!r}")
    return parts


def _open_dir(name: str, parent: int | None) -> int:
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (getattr(os, "ELOOP", 40), getattr(os, "ENOTDIR", 20)):
            raise Refused(f"{name!r} is a link or not a directory: not followed") from None
        raise


def _empty(fd: int, depth: int) -> int:
    """Remove everything in the open directory `fd`; the bytes `du -sb` counted for them."""
    if depth > MAX_DEPTH:
        raise Refused("directories nested too deep")
    freed = 0
    with os.scandir(fd) as entries:
        names = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
    for name, info in names:
        if stat.S_ISDIR(info.st_mode):
            inner = _open_dir(name, fd)
            try:
                freed += _empty(inner, depth + 1)
            finally:
                os.close(inner)
            os.rmdir(name, dir_fd=fd)
        else:
            os.unlink(name, dir_fd=fd)  # a link inside goes as a link
        freed += info.st_size
    return freed


def remove(root: int, name: str) -> dict[str, Any]:
    opened: list[int] = []
    try:
        parts = _parts(name)
        fd = root
        for part in parts[:-1]:
            fd = _open_dir(part, fd)
            opened.append(fd)
        last = parts[-1]
        info = os.stat(last, dir_fd=fd, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            return {"removed": False, "bytes": 0, "error": "a symbolic link: left alone"}
        if stat.S_ISDIR(info.st_mode):
            inner = _open_dir(last, fd)
            try:
                freed = _empty(inner, 0)
            finally:
                os.close(inner)
            os.rmdir(last, dir_fd=fd)
        else:
            os.unlink(last, dir_fd=fd)
            freed = 0
        return {"removed": True, "bytes": freed + info.st_size, "error": None}
    except FileNotFoundError:
        return {"removed": False, "bytes": 0, "error": "not found"}
    except Refused as exc:
        return {"removed": False, "bytes": 0, "error": str(exc)}
    except OSError as exc:
        return {"removed": False, "bytes": 0, "error": exc.strerror or str(exc)}
    finally:
        for fd in reversed(opened):
            os.close(fd)


def answer(request: Any) -> dict[str, Any]:
    if not isinstance(request, dict):
        return {"ok": False, "error": "expected a JSON object"}
    root, names = request.get("root"), request.get("names")
    if not isinstance(root, str) or not root.startswith("/"):
        return {"ok": False, "error": "'root' must be an absolute path"}
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return {"ok": False, "error": "'names' must be a list of strings"}
    if len(names) > MAX_NAMES:
        return {"ok": False, "error": f"at most {MAX_NAMES} names at once"}
    try:
        fd = _open_dir(root, None)
    except (OSError, Refused) as exc:
        return {"ok": False, "error": f"cannot open the run directory: {exc}"}
    try:
        return {"ok": True, "results": {name: remove(fd, name) for name in names}}
    finally:
        os.close(fd)


def main() -> int:
    try:
        reply = answer(json.loads(sys.stdin.buffer.read()))
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are
        reply = {"ok": False, "error": f"not JSON: {exc}"}
    sys.stdout.write(json.dumps(reply))
    return 0 if reply.get("ok") else 2


if __name__ == "__main__":
    sys.exit(main())
