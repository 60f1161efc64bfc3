#!/usr/bin/env python3
"""Safe unpacking of a code snapshot (a tar archive) into an empty directory.

The portal checks an upload with `check_archive` before it stores it; on the
cluster the same file runs as a script (sent on stdin to `python3 -I`, like the
agent) and unpacks into the attempt's run directory with `unpack`, checking
again: the rules live here once. Refused: absolute names, `..` components,
links (symbolic or hard) that point out of the directory or that a later member
would be written through, devices, FIFOs, duplicate names; capped: the
unpacked size and the file count. Standalone, stdlib-only, Python 3.8.
"""

from __future__ import annotations  # annotations stay strings on Python 3.8

import json
import os
import stat
import sys
import tarfile
from typing import IO, Any

CHUNK = 1024 * 1024
# Regular files keep their owner's execute bit, nothing else (no setuid, no group write).
FILE_MODES = (0o644, 0o755)


class UnsafeArchive(Exception):
    """The archive is refused; the message names the member and the rule."""


def _clean_name(name: str) -> str:
    """The member's path, normalised; refused when it could leave the directory."""
    if not name or "\x00" in name:
        raise UnsafeArchive(f"member {name!r}: an empty name or a NUL byte")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise UnsafeArchive(f"member {name!r}: an absolute path (names must be relative)")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise UnsafeArchive(f"member {name!r}: a '..' component would leave the directory")
    return "/".join(parts)


def _check_link(name: str, target: str, links: set[str]) -> None:
    """A symbolic link at `name` must point inside the root, and not through another link.

    Through a link, `..` climbs from wherever that link leads, so the target is walked
    a component at a time and refused the moment it passes a link with more to follow.
    """
    if not target or target.startswith("/") or "\x00" in target:
        raise UnsafeArchive(f"link {name!r} -> {target!r}: an absolute or empty target")
    parts: list[str] = name.split("/")[:-1]
    steps = [p for p in target.split("/") if p not in ("", ".")]
    for index, step in enumerate(steps):
        if step == "..":
            if not parts:
                raise UnsafeArchive(f"link {name!r} -> {target!r} points out of the directory")
            parts.pop()
            continue
        parts.append(step)
        if "/".join(parts) in links and index < len(steps) - 1:
            raise UnsafeArchive(f"link {name!r} -> {target!r} goes through another link")


def check_members(
    members: list[tarfile.TarInfo], *, max_bytes: int, max_files: int
) -> list[tuple[tarfile.TarInfo, str]]:
    """The members with their clean names, in order, or UnsafeArchive naming the first problem."""
    if len(members) > max_files:
        raise UnsafeArchive(f"{len(members)} members, over the cap of {max_files} files")
    checked: list[tuple[tarfile.TarInfo, str]] = []
    seen: set[str] = set()
    links: set[str] = set()
    total = 0
    for member in members:
        name = _clean_name(member.name)
        if not name:
            if member.isdir():
                continue  # "./" itself
            raise UnsafeArchive(f"member {member.name!r} has no name")
        if name in seen:
            raise UnsafeArchive(f"member {name!r} appears twice")
        # Written through a link, a member would land wherever the link points.
        prefix = name
        while "/" in prefix:
            prefix = prefix.rsplit("/", 1)[0]
            if prefix in links:
                raise UnsafeArchive(f"member {name!r} lies under the link {prefix!r}")
        if member.issym():
            links.add(name)
        elif member.islnk():
            raise UnsafeArchive(f"member {name!r}: hard links are not accepted")
        elif not (member.isfile() or member.isdir()):
            raise UnsafeArchive(f"member {name!r}: a device, FIFO or other special file")
        total += max(member.size, 0) if member.isfile() else 0
        if total > max_bytes:
            raise UnsafeArchive(f"unpacked, the files pass the cap of {max_bytes} bytes")
        seen.add(name)
        checked.append((member, name))
    for member, name in checked:
        if member.issym():
            _check_link(name, member.linkname, links)
    return checked


def _open(path: str) -> tarfile.TarFile:
    try:
        return tarfile.open(path, mode="r:*")  # gzip, bzip2, xz or plain
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UnsafeArchive(f"not a tar archive (tar.gz, tar.bz2, tar.xz or tar): {exc}") from exc


def _members(archive: tarfile.TarFile, max_files: int) -> list[tarfile.TarInfo]:
    members: list[tarfile.TarInfo] = []
    try:
        for member in archive:
            members.append(member)
            if len(members) > max_files:
                raise UnsafeArchive(
                    f"more than {max_files} members, over the cap of {max_files} files"
                )
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UnsafeArchive(f"a damaged tar archive: {exc}") from exc
    return members


def check_archive(path: str, *, max_bytes: int, max_files: int) -> dict[str, int]:
    """The archive's file count and unpacked size; UnsafeArchive if it breaks a rule."""
    with _open(path) as archive:
        checked = check_members(
            _members(archive, max_files), max_bytes=max_bytes, max_files=max_files
        )
    sizes = [m.size for m, _ in checked if m.isfile()]
    return {"files": len(sizes), "bytes": sum(sizes)}


def _copy(source: IO[bytes], target: int, size: int) -> None:
    left = size
    while left > 0:
        chunk = source.read(min(CHUNK, left))
        if not chunk:
            raise UnsafeArchive("the archive ends inside a file")
        os.write(target, chunk)
        left -= len(chunk)


def unpack(path: str, dest: str, *, max_bytes: int, max_files: int) -> dict[str, int]:
    """Unpack into `dest` (created, or empty), checking every member first."""
    os.makedirs(dest, mode=0o700, exist_ok=True)
    if os.listdir(dest):
        raise UnsafeArchive(f"{dest} is not empty")
    with _open(path) as archive:
        checked = check_members(
            _members(archive, max_files), max_bytes=max_bytes, max_files=max_files
        )
        for member, name in checked:
            target = os.path.join(dest, *name.split("/"))
            parent = os.path.dirname(target)
            # Parents the archive does not list are made here, as plain directories.
            os.makedirs(parent, mode=0o700, exist_ok=True)
            if member.isdir():
                os.makedirs(target, mode=0o700, exist_ok=True)
            elif member.issym():
                os.symlink(member.linkname, target)
            else:
                mode = FILE_MODES[1] if member.mode & stat.S_IXUSR else FILE_MODES[0]
                flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                handle = os.open(target, flags, mode)
                try:
                    source = archive.extractfile(member)
                    if source is None:
                        raise UnsafeArchive(f"member {name!r} cannot be read")
                    _copy(source, handle, member.size)
                finally:
                    os.close(handle)
    sizes = [m.size for m, _ in checked if m.isfile()]
    return {"files": len(sizes), "bytes": sum(sizes)}


def main(stdin: IO[bytes], stdout: IO[str]) -> int:
    """One JSON request ({archive, dest, max_bytes, max_files}), one JSON reply line."""
    try:
        request: Any = json.loads(stdin.read().decode())
        result = unpack(
            str(request["archive"]),
            str(request["dest"]),
            max_bytes=int(request["max_bytes"]),
            max_files=int(request["max_files"]),
        )
        os.unlink(str(request["archive"]))
        reply: dict[str, Any] = {"ok": True, **result}
    except UnsafeArchive as exc:
        reply = {"ok": False, "error": str(exc)}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reply = {"ok": False, "error": f"cannot unpack: {exc}"}
    stdout.write(json.dumps(reply) + "\n")
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer, sys.stdout))
