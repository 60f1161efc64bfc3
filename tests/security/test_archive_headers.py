"""The archive pre-scan (issue 33, point 1): what tarfile must never parse is refused first.

`scan_headers` walks a tar's headers as tarfile will read them. Python 3.11.7's tarfile
parses a pax header in time quadratic in its size with the GIL held (CVE-2024-6232): the
pen test's 149 KB tar held an upload 12.5 s. The scan refuses such a header after reading
its 512-byte ustar header, and stops an xz bomb at the unpacked cap before decompressing
the member that passes it. Archives written by real tools (GNU tar, tarfile, git) pass.
"""

import io
import lzma
import subprocess
import tarfile
from pathlib import Path

import pytest
from portal_client.packing import pack

from clusters.agent.code_unpack import (
    MAX_HEADER_BYTES,
    UnsafeArchive,
    check_archive,
    scan_headers,
    unpack,
)
from devtools.archives import (
    BLOCK,
    END,
    FINDING_DIGITS,
    extended,
    finding_tar,
    header,
    padded,
    record,
    regular,
    xz_bomb,
)

CAPS = {"max_bytes": 10_000, "max_files": 20}
GIB = 1024 * 1024 * 1024
MIB = 1024 * 1024


class Counting(io.BufferedIOBase):
    """A stream that counts the bytes read from it (what the scan decompressed)."""

    def __init__(self, inner: io.BufferedIOBase) -> None:
        self.inner = inner
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        data = self.inner.read(size)
        self.read_bytes += len(data)
        return data


def _scan(data: bytes, **caps: int) -> Counting:
    stream = Counting(io.BytesIO(data))
    scan_headers(stream, **{**CAPS, **caps})
    return stream


def test_the_findings_pax_header_is_refused_after_its_first_block(tmp_path: Path) -> None:
    tar = finding_tar()
    assert 149_000 < len(tar) < 155_000  # the pen test's 149 KB tar
    stream = Counting(io.BytesIO(tar))
    with pytest.raises(UnsafeArchive) as refused:
        scan_headers(stream, **CAPS)
    message = str(refused.value)
    assert f"of {FINDING_DIGITS} bytes, over the limit of {MAX_HEADER_BYTES} bytes" in message
    assert "16 KiB" in message
    # Refused on its ustar header alone: not one byte of the digits was read.
    assert stream.read_bytes == BLOCK
    path = tmp_path / "finding.tar"
    path.write_bytes(tar)
    with pytest.raises(UnsafeArchive, match="over the limit of 16384 bytes"):
        check_archive(str(path), **CAPS)


@pytest.mark.parametrize(
    "kind", [tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK]
)
def test_every_kind_of_extended_header_past_the_limit_is_refused(kind: bytes) -> None:
    body = record("comment", b"1" * MAX_HEADER_BYTES)
    with pytest.raises(UnsafeArchive, match=f"type '{kind.decode()}'"):
        _scan(extended(body, kind) + regular("a.py", b"") + END)


def test_a_header_at_the_limit_is_read() -> None:
    body = record("comment", b"c" * (MAX_HEADER_BYTES - 20))
    assert len(body) == MAX_HEADER_BYTES - 20 + len(" comment=\n") + 5
    _scan(extended(body) + regular("a.py", b"x") + END)


def _gnu_tar(tmp_path: Path, fmt: str, compress: str) -> bytes:
    """GNU tar's own archive of a tree with a long name and a long link target."""
    tree = tmp_path / f"tree-{fmt}"
    deep = tree / ("d" * 90) / ("e" * 90) / ("f" * 90)
    deep.mkdir(parents=True)
    (deep / "train_with_a_rather_long_name.py").write_text("print('hi')\n")
    (tree / "latest").symlink_to(deep.relative_to(tree) / "train_with_a_rather_long_name.py")
    (tree / "données.txt").write_text("é\n")
    out = tmp_path / f"code-{fmt}.tar"
    subprocess.run(
        ["tar", f"--format={fmt}", compress, "-cf", str(out), "-C", str(tree), "."], check=True
    )
    return out.read_bytes()


@pytest.mark.parametrize("fmt", ["pax", "gnu", "oldgnu", "ustar", "v7"])
@pytest.mark.parametrize("compress", ["--gzip", "--xz", "--bzip2"])
def test_real_tars_pass(tmp_path: Path, fmt: str, compress: str) -> None:
    short = fmt in ("ustar", "v7")  # no room for a 280-character link target
    if short:
        tree = tmp_path / "plain"
        (tree / "pkg").mkdir(parents=True)
        (tree / "pkg" / "train.py").write_text("print('hi')\n")
        out = tmp_path / "plain.tar"
        subprocess.run(
            ["tar", f"--format={fmt}", compress, "-cf", str(out), "-C", str(tree), "."],
            check=True,
        )
        data = out.read_bytes()
    else:
        data = _gnu_tar(tmp_path, fmt, compress)
    path = tmp_path / "code"
    path.write_bytes(data)
    counts = check_archive(str(path), **CAPS)
    assert counts["files"] == (1 if short else 2)


def test_the_python_clients_archive_passes(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / ("long_" * 40 + ".py")).write_text("x = 1\n")
    (tmp_path / "ünïcode.py").write_text("y = 2\n")
    path = tmp_path / "code.tar.gz"
    path.write_bytes(pack(tmp_path).data)
    assert check_archive(str(path), **CAPS) == {"files": 2, "bytes": 12}


def test_python_tarfiles_pax_and_gnu_headers_pass(tmp_path: Path) -> None:
    for fmt in (tarfile.PAX_FORMAT, tarfile.GNU_FORMAT):
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w:gz", format=fmt) as archive:
            info = tarfile.TarInfo("pkg/" + "n" * 300 + ".py")
            info.size = 2
            archive.addfile(info, io.BytesIO(b"x\n"))
            link = tarfile.TarInfo("ünïcode-link")
            link.type, link.linkname = tarfile.SYMTYPE, "pkg/" + "n" * 300 + ".py"
            archive.addfile(link)
        path = tmp_path / f"code-{fmt}.tar.gz"
        path.write_bytes(raw.getvalue())
        assert check_archive(str(path), **CAPS) == {"files": 1, "bytes": 2}


BIG = record("comment", b"1" * FINDING_DIGITS)
HIDDEN = extended(BIG[: MAX_HEADER_BYTES + 1])  # what a scanner out of step would not see


@pytest.mark.parametrize(
    ("tar", "says"),
    [
        # A pax size of 0 over a header that says 1024: tarfile reads the next header
        # right after it, where the header's own size would have skipped.
        (
            extended(record("size", b"0"))
            + header("a.py", tarfile.REGTYPE, len(HIDDEN))
            + HIDDEN
            + END,
            "over the limit",
        ),
        # An old-style directory (a regular member named with a slash) has no data.
        (header("dir/", tarfile.AREGTYPE, len(HIDDEN)) + HIDDEN + END, "over the limit"),
        # A symbolic link's size is not skipped either.
        (header("l", tarfile.SYMTYPE, len(HIDDEN)) + HIDDEN + END, "over the limit"),
        (extended(record("size", b"5"), tarfile.XGLTYPE) + regular("a", b"x") + END, "pax size"),
        (extended(record("size", b"-5")) + regular("a", b"x") + END, "pax size"),
        (extended(record("path", b"a")) * 2 + regular("a", b"x") + END, "two extended headers"),
        (extended(record("GNU.sparse.size", b"9")) + regular("a", b"x") + END, "sparse"),
        (header("s", tarfile.GNUTYPE_SPARSE, 0) + END, "sparse"),
        (header("odd", b"Z", 0) + END, "unknown type"),
        (extended(record("path", b"a")) + END, "no member after it"),
        (extended(b"99 path=a\n") + regular("a", b"x") + END, "damaged pax header"),
        (extended(b"12 path_a\n") + regular("a", b"x") + END, "damaged pax header"),
        (extended(b"1" * 30 + b" p=a\n") + regular("a", b"x") + END, "damaged pax header"),
        (regular("a", b"x") + b"\x01" * BLOCK + END, "checksum"),
    ],
)
def test_what_tarfile_could_read_out_of_step_is_refused(tar: bytes, says: str) -> None:
    with pytest.raises(UnsafeArchive, match=says):
        _scan(tar)


def test_a_pax_size_is_what_the_cap_counts() -> None:
    data = b"y" * 20_000
    tar = extended(record("size", str(len(data)).encode()))
    tar += header("big.bin", tarfile.REGTYPE, 0) + padded(data) + END
    with pytest.raises(UnsafeArchive, match="cap of 10000 bytes"):
        _scan(tar)


def test_the_findings_xz_bomb_is_refused_before_its_data_is_decompressed(tmp_path: Path) -> None:
    bomb = xz_bomb(GIB)
    assert len(bomb) < 200 * 1024  # the pen test's: 152 KiB that unpacks to 1 GiB
    with lzma.LZMAFile(io.BytesIO(bomb)) as xz, pytest.raises(UnsafeArchive) as refused:
        stream = Counting(xz)
        scan_headers(stream, max_bytes=64 * MIB, max_files=20)
    assert f"cap of {64 * MIB} bytes" in str(refused.value)
    assert stream.read_bytes == BLOCK
    # On the cluster the same file unpacks nothing of it.
    path = tmp_path / "bomb.tar.xz"
    path.write_bytes(bomb)
    out = tmp_path / "out"
    with pytest.raises(UnsafeArchive, match="cap of"):
        unpack(str(path), str(out), max_bytes=64 * MIB, max_files=20)
    assert list(out.iterdir()) == []


def test_a_bomb_of_many_files_stops_at_the_cap() -> None:
    bomb = xz_bomb(GIB, files=64)  # 64 files of 16 MiB
    with lzma.LZMAFile(io.BytesIO(bomb)) as xz, pytest.raises(UnsafeArchive, match="cap of"):
        stream = Counting(xz)
        scan_headers(stream, max_bytes=40 * MIB, max_files=100)
    # Two whole files (32 MiB) and three headers decompressed; the rest never.
    assert stream.read_bytes == 2 * 16 * MIB + 3 * BLOCK
