"""Hostile tar archives built block by block, as an attacker would write them (issue 33):
for the tests of the archive check and bench/hostile.py alike."""

import io
import lzma
import tarfile

BLOCK = 512
END = bytes(2 * BLOCK)
# The finding: a pax header whose one record is a 150,000-digit length (a 149 KB tar).
FINDING_DIGITS = 150_000


def header(name: str, kind: bytes, size: int) -> bytes:
    """A ustar header of type `kind` declaring `size` bytes of data."""
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.USTAR_FORMAT)


def padded(data: bytes) -> bytes:
    return data + bytes(-len(data) % BLOCK)


def extended(body: bytes, kind: bytes = tarfile.XHDTYPE) -> bytes:
    """An extended header (pax x or g, GNU L or K) holding `body`."""
    return header("././@PaxHeader", kind, len(body)) + padded(body)


def record(keyword: str, value: bytes) -> bytes:
    """One pax record, `LENGTH KEYWORD=VALUE\\n`, its length counting itself."""
    rest = b" " + keyword.encode() + b"=" + value + b"\n"
    length = len(rest) + 1
    while len(str(length)) + len(rest) != length:
        length += 1
    return str(length).encode() + rest


def regular(name: str, data: bytes) -> bytes:
    return header(name, tarfile.REGTYPE, len(data)) + padded(data)


def finding_tar() -> bytes:
    """The pen test's archive: one pax header of 150,000 digits, then a file."""
    return extended(b"1" * FINDING_DIGITS) + regular("train.py", b"print('hi')\n") + END


def slow_pax_tar(members: int, digits: int) -> bytes:
    """Pax headers within the header limit, each a well-formed record of `digits` digits:
    each costs a vulnerable tarfile (CVE-2024-6232) time quadratic in `digits`. The last
    member climbs out of the directory, so the archive is refused once it was all read."""
    parts = [
        extended(record("comment", b"7" * digits)) + regular(f"f{i}.py", b"x = 1\n")
        for i in range(members)
    ]
    return b"".join(parts) + regular("../escape.py", b"evil\n") + END


def xz_bomb(total: int, *, files: int = 1) -> bytes:
    """An xz archive of `files` members of zeros, `total` bytes in all, in a few KiB per
    16 MiB: concatenated xz streams (as `xz` writes and reads them), each kind made once."""
    each = total // files
    chunk = 16 * 1024 * 1024
    compressed: dict[int, bytes] = {}

    def zeros(size: int) -> bytes:
        if size not in compressed:
            compressed[size] = lzma.compress(bytes(size))
        return compressed[size]

    out = io.BytesIO()
    for i in range(files):
        out.write(lzma.compress(header(f"zeros{i}.bin", tarfile.REGTYPE, each)))
        whole, rest = divmod(each + (-each % BLOCK), chunk)
        out.write(zeros(chunk) * whole + zeros(rest))
    out.write(lzma.compress(END))
    return out.getvalue()
