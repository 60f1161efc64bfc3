#!/usr/bin/env python3
"""Safe unpacking of a code snapshot (a tar archive) into an empty directory.

The portal checks an upload with `check_archive` before it stores it; on the
cluster the same file runs as a script (sent on stdin to `python3 -I`, like the
agent) and unpacks into the attempt's run directory with `unpack`, checking
again: the rules live here once. Refused: absolute names, `..` components,
links (symbolic or hard) that point out of the directory or that a later member
would be written through, devices, FIFOs, duplicate names; capped: the
unpacked size and the file count. Before tarfile parses anything, `scan_headers`
walks the headers as tarfile will, refusing an extended header past
MAX_HEADER_BYTES and stopping at the size and file caps as it decompresses.
The portal runs the check in a process of its own with limits
(`jobs.code.checker`). Standalone, stdlib-only, Python 3.8.
"""

from __future__ import annotations  # annotations stay strings on Python 3.8

import bz2
import gzip
import io
import json
import lzma
import os
import stat
import sys
import tarfile
import zlib
from typing import IO, Any

CHUNK = 1024 * 1024
BLOCK = 512
# The longest extended header read (a pax `x`/`g` record set, a GNU long name `L` or
# link target `K`): a PATH_MAX name and link target fit. Python before 3.11.10 and
# 3.12.6 parses a pax header in time quadratic in its size (CVE-2024-6232: 16 KiB of
# digits cost it 0.6 s, 150 KB 40 s), so a longer one is refused before tarfile reads it.
MAX_HEADER_BYTES = 16 * 1024
REGULAR_TYPES = (b"0", b"\x00", b"7")  # members whose data follows their header
DATA_LESS_TYPES = (b"1", b"2", b"3", b"4", b"5", b"6")  # links, devices, directories, FIFOs
PAX_TYPES = (b"x", b"X", b"g")
LONG_NAME_TYPES = (b"L", b"K")
# What a damaged compressed stream raises while it is read.
STREAM_ERRORS = (OSError, EOFError, ValueError, lzma.LZMAError, zlib.error)
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
            raise bytes_over(max_bytes)
        seen.add(name)
        checked.append((member, name))
    for member, name in checked:
        if member.issym():
            _check_link(name, member.linkname, links)
    return checked


def _files_over(max_files: int) -> UnsafeArchive:
    return UnsafeArchive(f"more than {max_files} members, over the cap of {max_files} files")


def bytes_over(max_bytes: int) -> UnsafeArchive:
    """The refusal of an archive past the byte cap (the portal's check words its own caps)."""
    return UnsafeArchive(f"unpacked, the files pass the cap of {max_bytes} bytes")


def _read(stream: io.BufferedIOBase, size: int) -> bytes:
    """`size` bytes, fewer only at the end of the stream."""
    pieces = []
    while size > 0:
        piece = stream.read(min(size, CHUNK))
        if not piece:
            break
        pieces.append(piece)
        size -= len(piece)
    return b"".join(pieces)


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


def _number(field: bytes, where: str) -> int:
    """A header's number: octal text, or big-endian binary after a 0x80 byte (GNU)."""
    if field[:1] == b"\x80":
        return int.from_bytes(field[1:], "big")
    text = field.split(b"\x00", 1)[0].strip()
    if not all(c in b"01234567" for c in text):
        raise UnsafeArchive(f"{where}: a damaged header (a number field reads {text!r})")
    return int(text or b"0", 8)


def _checksum_ok(header: bytes) -> bool:
    """The stored checksum is the sum of the header's bytes (its own field as spaces),
    counted unsigned or, as some tars do, signed."""
    try:
        stored = _number(header[148:156], "")
    except UnsafeArchive:
        return False
    rest = header[:148] + header[156:]
    unsigned = 256 + sum(rest)
    return stored in (unsigned, unsigned - 256 * sum(b >> 7 for b in rest))


def _pax_records(data: bytes, where: str) -> dict[bytes, bytes]:
    """A pax header's records (`LENGTH KEYWORD=VALUE\\n`), each read once, left to right;
    refused unless every record is whole (tarfile stops at a NUL byte between them)."""
    records: dict[bytes, bytes] = {}
    at = 0
    while at < len(data) and data[at] != 0:
        space = data.find(b" ", at, at + 21)
        digits = data[at:space] if space > at else b""
        end = at + int(digits) if digits.isdigit() else at
        equals = data.find(b"=", space + 1, end)
        if end > len(data) or equals <= space + 1 or data[end - 1 : end] != b"\n":
            raise UnsafeArchive(f"{where}: a damaged pax header (a record at byte {at})")
        records[data[space + 1 : equals]] = data[equals + 1 : end - 1]
        at = end
    return records


class _Walk:
    """Where the walk through one archive's headers stands."""

    def __init__(self, max_bytes: int, max_files: int) -> None:
        self.max_bytes = max_bytes
        self.max_files = max_files
        self.members = 0
        self.total = 0
        self.pending: set[bytes] = set()  # extended headers read for the next member
        self.pax_size: int | None = None  # a pax `size` for the next member

    def extended(self, stream: io.BufferedIOBase, kind: bytes, size: int, where: str) -> None:
        """Read an extended header of `size` bytes, refused past MAX_HEADER_BYTES unread."""
        if size > MAX_HEADER_BYTES:
            raise UnsafeArchive(
                f"{where}: an extended header (type {kind.decode('latin-1')!r}: a pax header, "
                f"long name or link target) of {size} bytes, over the limit of "
                f"{MAX_HEADER_BYTES} bytes ({MAX_HEADER_BYTES // 1024} KiB) for one header"
            )
        # Two of a kind for one member nest in tarfile, the first taking precedence.
        same = b"x" if kind == b"X" else kind
        if same in self.pending and same != b"g":
            raise UnsafeArchive(f"{where}: two extended headers of type {same!r} for one member")
        self.pending.add(same)
        data = _read(stream, _padded(size))[:size]
        if len(data) < size:
            raise UnsafeArchive(f"{where}: the archive ends inside an extended header")
        if kind not in PAX_TYPES:
            return
        records = _pax_records(data, where)
        if any(key.startswith(b"GNU.sparse.") for key in records):
            raise UnsafeArchive(f"{where}: sparse files are not accepted")
        if b"size" in records:
            value = records[b"size"]
            if kind == b"g" or not value.isdigit() or len(value) > 20:
                raise UnsafeArchive(f"{where}: a pax size of {value[:40]!r} is not accepted")
            self.pax_size = int(value)

    def member(
        self, stream: io.BufferedIOBase, header: bytes, kind: bytes, size: int, where: str
    ) -> int:
        """Count a member against the caps, then pass its data: the bytes passed."""
        if kind == b"S":
            raise UnsafeArchive(f"{where}: sparse files are not accepted")
        if kind not in REGULAR_TYPES + DATA_LESS_TYPES:
            raise UnsafeArchive(f"{where}: a member of unknown type {kind!r}")
        self.members += 1
        if self.members > self.max_files:
            raise _files_over(self.max_files)
        if self.pax_size is not None:
            size = self.pax_size
        self.pending, self.pax_size = set(), None
        # An old-style directory is a regular member whose name ends in a slash.
        if kind in REGULAR_TYPES and not header[:100].split(b"\x00", 1)[0].endswith(b"/"):
            self.total += size
            if self.total > self.max_bytes:
                raise bytes_over(self.max_bytes)
            if len(_read(stream, _padded(size))) < _padded(size):
                raise UnsafeArchive(f"{where}: the archive ends inside a file")
            return _padded(size)
        return 0


def scan_headers(stream: io.BufferedIOBase, *, max_bytes: int, max_files: int) -> None:
    """Walk a tar stream's headers as tarfile will read them, in one pass and linear
    time: UnsafeArchive for an extended header past MAX_HEADER_BYTES (before its bytes
    are read), for a member past the file or byte cap (before its data is decompressed),
    and for anything tarfile could read differently (sparse files, a pax `size` it
    would apply elsewhere, a damaged header)."""
    walk = _Walk(max_bytes, max_files)
    offset = 0
    while True:
        header = _read(stream, BLOCK)
        where = f"the header at byte {offset}"
        if not header and offset:
            if walk.pending:
                raise UnsafeArchive(f"{where}: an extended header with no member after it")
            return
        if header.count(0) == BLOCK:  # tarfile reads no further
            if walk.pending:
                raise UnsafeArchive(f"{where}: an extended header with no member after it")
            return
        if len(header) < BLOCK or (offset == 0 and not _checksum_ok(header)):
            raise UnsafeArchive("not a tar archive (tar.gz, tar.bz2, tar.xz or tar)")
        if not _checksum_ok(header):
            raise UnsafeArchive(f"{where}: a damaged header (its checksum does not match)")
        kind, size = header[156:157], _number(header[124:136], where)
        if kind in PAX_TYPES + LONG_NAME_TYPES:
            walk.extended(stream, kind, size, where)
            offset += BLOCK + _padded(size)
        else:
            offset += BLOCK + walk.member(stream, header, kind, size, where)


def _decompressed(raw: io.BufferedReader) -> io.BufferedIOBase:
    """The tar stream in `raw`, by its first bytes: gzip, bzip2, xz, else plain tar."""
    start = raw.read(6)
    raw.seek(0)
    if start.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if start.startswith(b"BZh"):
        return bz2.BZ2File(raw)
    if start.startswith(b"\xfd7zXZ\x00"):
        return lzma.LZMAFile(raw)
    return raw


def _scan(path: str, *, max_bytes: int, max_files: int) -> None:
    with open(path, "rb") as raw, _decompressed(raw) as stream:
        try:
            scan_headers(stream, max_bytes=max_bytes, max_files=max_files)
        except STREAM_ERRORS as exc:
            raise UnsafeArchive(f"a damaged archive: {exc}") from exc


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
                raise _files_over(max_files)
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UnsafeArchive(f"a damaged tar archive: {exc}") from exc
    return members


def check_archive(path: str, *, max_bytes: int, max_files: int) -> dict[str, int]:
    """The archive's file count and unpacked size; UnsafeArchive if it breaks a rule."""
    _scan(path, max_bytes=max_bytes, max_files=max_files)
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
    _scan(path, max_bytes=max_bytes, max_files=max_files)
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
    """One JSON request ({archive, dest, max_bytes, max_files}), one JSON reply line.

    With `"check": true` (the portal's own check) the archive is only checked, and kept.
    """
    try:
        request: Any = json.loads(stdin.read().decode())
        caps = {"max_bytes": int(request["max_bytes"]), "max_files": int(request["max_files"])}
        archive = str(request["archive"])
        if request.get("check"):
            result = check_archive(archive, **caps)
        else:
            result = unpack(archive, str(request["dest"]), **caps)
            os.unlink(archive)
        reply: dict[str, Any] = {"ok": True, **result}
    except UnsafeArchive as exc:
        reply = {"ok": False, "error": str(exc)}
    except MemoryError:
        reply = {"ok": False, "error": "reading the archive needs more memory than allowed"}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        reply = {"ok": False, "error": f"cannot unpack: {exc}"}
    stdout.write(json.dumps(reply) + "\n")
    return 0 if reply["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.stdin.buffer, sys.stdout))
