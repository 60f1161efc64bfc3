"""Log bytes by offset: stored once, read by range, bounded in size.

Each poll asks the agent for a file's bytes from the stored size on, so bytes
arrive in order; a range stored once is never stored again (a repeated or
overlapping delivery is cut to its new part). Storage per file is bounded by
`LOG_KEEP_BYTES`: older bytes are dropped here and read from the cluster's
copy when someone scrolls back that far.
"""

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import NamedTuple

from django.conf import settings
from django.db.models import Q

from clusters.agent import AgentRequest, FileRead, run_agent
from clusters.selectors import account_endpoint
from clusters.ssh import SSHError, pool
from jobs.models import Attempt
from jobs.rundir import RunDir
from monitoring.models import LogChunk, LogFile
from portal_lib.bulk import bulk_insert, bulk_update

# No stored chunk is larger (a read of a range looks this far back for its first chunk).
MAX_CHUNK_BYTES = 1024 * 1024
# What one poll reads of a file: at least READ_BYTES, and as much as the file is behind
# (its size when last seen, less the bytes stored) up to READ_BYTES_MAX, so a burst
# drains in a few polls rather than a MiB a second. The ceiling bounds what one job's
# file costs a poll; the agent call's `max_bytes` bounds a whole account's share.
READ_BYTES = 1024 * 1024
READ_BYTES_MAX = 8 * 1024 * 1024
# What one tail request returns at most, however long its lines.
MAX_TAIL_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class LogSlice:
    offset: int
    end: int
    data: bytes
    size: int  # all bytes known of the file
    first_offset: int  # the lowest offset still stored here

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@dataclass(frozen=True)
class Delivery:
    """New bytes of one file from one poll."""

    attempt_id: int
    name: str
    offset: int
    data: bytes
    remote_size: int | None = None
    inode: int | None = None


@dataclass(frozen=True)
class Stored:
    log_file: LogFile
    offset: int
    data: bytes


class FileSize(NamedTuple):
    """What deciding a file's next read needs (`log_sizes`)."""

    size: int
    remote_size: int


def log_files(
    *, attempt_ids: Iterable[int], names: Iterable[str] = ()
) -> dict[tuple[int, str], LogFile]:
    """The attempts' followed files, creating missing rows for the given names."""
    attempt_ids = list(attempt_ids)
    rows = LogFile.objects.all()
    files = {(f.attempt_id, f.name): f for f in rows.filter(attempt_id__in=attempt_ids)}
    if created := _created(attempt_ids, names, files):
        files.update({(f.attempt_id, f.name): f for f in created})
    return files


def log_sizes(
    *, attempt_ids: Iterable[int], names: Iterable[str]
) -> dict[tuple[int, str], FileSize]:
    """`log_files`, only where each file's next read starts: values, not rows (the parser
    state of thousands of files, JSON, is not decoded for nothing)."""
    attempt_ids = list(attempt_ids)
    fields = ("attempt_id", "name", "size", "remote_size")
    rows = LogFile.objects.filter(attempt_id__in=attempt_ids).values_list(*fields)
    sizes = {(a, n): FileSize(size, remote) for a, n, size, remote in rows}
    if created := _created(attempt_ids, names, sizes):
        sizes.update({(f.attempt_id, f.name): FileSize(f.size, f.remote_size) for f in created})
    return sizes


def _created(
    attempt_ids: list[int], names: Iterable[str], present: Collection[tuple[int, str]]
) -> list[LogFile]:
    """The rows of the given names that `present` lacks, created (or made meanwhile)."""
    missing = [
        LogFile(attempt_id=a, name=n) for a in attempt_ids for n in names if (a, n) not in present
    ]
    if not missing:
        return []
    LogFile.objects.bulk_create(missing, ignore_conflicts=True)
    return list(
        LogFile.objects.filter(
            attempt_id__in={f.attempt_id for f in missing}, name__in={f.name for f in missing}
        )
    )


def read_limit(log_file: LogFile | FileSize) -> int:
    """How many bytes of this file the next poll asks for."""
    behind = log_file.remote_size - log_file.size
    return min(max(behind, READ_BYTES), READ_BYTES_MAX)


def log_store(
    *, files: dict[tuple[int, str], LogFile], deliveries: Iterable[Delivery]
) -> list[Stored]:
    """Store what is new in each delivery with one bulk insert and one bulk update."""
    chunks: list[LogChunk] = []
    changed: list[LogFile] = []
    stored: list[Stored] = []
    for delivery in deliveries:
        log_file = files[(delivery.attempt_id, delivery.name)]
        moved = delivery.remote_size is not None and (
            delivery.remote_size != log_file.remote_size or delivery.inode != log_file.inode
        )
        if moved and delivery.remote_size is not None:
            log_file.remote_size = delivery.remote_size
            log_file.inode = delivery.inode
        skip = log_file.size - delivery.offset
        if skip < 0 or skip >= len(delivery.data):
            # A gap (never asked for) or nothing new: the next poll asks from `size`.
            if moved:
                changed.append(log_file)
            continue
        data = delivery.data[skip:]
        chunks += [
            LogChunk(
                log_file=log_file, offset=log_file.size + at, data=data[at : at + MAX_CHUNK_BYTES]
            )
            for at in range(0, len(data), MAX_CHUNK_BYTES)
        ]
        stored.append(Stored(log_file=log_file, offset=log_file.size, data=data))
        log_file.size += len(data)
        changed.append(log_file)
    bulk_insert(LogChunk, chunks)
    if changed:
        bulk_update(LogFile, changed, ["size", "remote_size", "inode"])
        _trim([f for f in changed if f.size - f.first_offset > _keep_bytes() * 5 // 4])
    return stored


def _keep_bytes() -> int:
    return int(getattr(settings, "LOG_KEEP_BYTES", 64 * 1024 * 1024))


def _trim(files: list[LogFile]) -> None:
    for log_file in files:
        cutoff = log_file.size - _keep_bytes()
        # Whole chunks only: the first kept chunk starts at or before the cutoff.
        first_kept = (
            LogChunk.objects.filter(log_file=log_file, offset__lte=cutoff)
            .order_by("-offset")
            .values_list("offset", flat=True)
            .first()
        )
        if first_kept is None or first_kept <= log_file.first_offset:
            continue
        LogChunk.objects.filter(log_file=log_file, offset__lt=first_kept).delete()
        log_file.first_offset = first_kept
        LogFile.objects.filter(pk=log_file.pk).update(first_offset=first_kept)


def _log_file(attempt_id: int, name: str) -> LogFile | None:
    return LogFile.objects.filter(attempt_id=attempt_id, name=name).first()


def log_read(*, attempt_id: int, file: str, offset: int, limit: int) -> LogSlice:
    """Stored bytes [offset, offset + limit); offset -1 means the last `limit` bytes."""
    log_file = _log_file(attempt_id, file)
    if log_file is None:
        return LogSlice(offset=0, end=0, data=b"", size=0, first_offset=0)
    if offset < 0:
        offset = max(log_file.size - limit, log_file.first_offset)
    start = max(offset, log_file.first_offset)
    end = min(offset + limit, log_file.size)
    if start >= end:
        return LogSlice(start, start, b"", log_file.size, log_file.first_offset)
    rows = LogChunk.objects.filter(
        Q(offset__lt=end) & Q(offset__gte=start - MAX_CHUNK_BYTES), log_file=log_file
    ).order_by("offset")
    data = bytearray()
    for chunk in rows.values_list("offset", "data"):
        chunk_offset, chunk_data = chunk[0], bytes(chunk[1])
        lo = max(start, chunk_offset) - chunk_offset
        hi = min(end, chunk_offset + len(chunk_data)) - chunk_offset
        if hi > lo:
            data += chunk_data[lo:hi]
    return LogSlice(start, start + len(data), bytes(data), log_file.size, log_file.first_offset)


def log_tail(
    *, attempt_id: int, file: str, lines: int, max_bytes: int = MAX_TAIL_BYTES
) -> LogSlice:
    """The last `lines` lines, at most `max_bytes` of them (cut at a line start if any).

    Reads only the chunks that can hold the last `max_bytes`, so one request costs at
    most `max_bytes` plus one chunk whatever the lines are like (a log without newlines
    once assembled all its stored bytes here).
    """
    log_file = _log_file(attempt_id, file)
    if log_file is None:
        return LogSlice(offset=0, end=0, data=b"", size=0, first_offset=0)
    # No chunk is longer than MAX_CHUNK_BYTES: one starting before this ends before the cap.
    floor = log_file.size - max_bytes - MAX_CHUNK_BYTES
    chunks = LogChunk.objects.filter(log_file=log_file, offset__gte=floor).order_by("-offset")
    parts: list[bytes] = []
    newlines, read, held = 0, 0, 0
    # One more newline than lines asked for marks where the first wanted line starts.
    while newlines <= lines and held < max_bytes:
        rows = [bytes(d) for d in chunks.values_list("data", flat=True)[read : read + 8]]
        if not rows:
            break
        read += len(rows)
        for data in rows:
            parts.append(data)
            newlines += data.count(b"\n")
            held += len(data)
    data = b"".join(reversed(parts))
    if len(data) > max_bytes:
        data = data[-max_bytes:]
        cut = data.find(b"\n")
        data = data[cut + 1 :] if 0 <= cut < len(data) - 1 else data
    body = data[:-1] if data.endswith(b"\n") else data
    cut = len(body)
    for _ in range(lines):
        cut = body.rfind(b"\n", 0, cut)
        if cut < 0:
            break
    if cut >= 0:
        data = data[cut + 1 :]
    start = log_file.size - len(data)
    return LogSlice(start, log_file.size, data, log_file.size, log_file.first_offset)


def log_read_any(*, attempt: Attempt, file: str, offset: int, limit: int) -> LogSlice:
    """Like log_read, but bytes trimmed here are read from the cluster's copy (one SSH call)."""
    local = log_read(attempt_id=attempt.pk, file=file, offset=offset, limit=limit)
    if offset < 0 or offset >= local.first_offset or attempt.account is None:
        return local
    stop = min(offset + limit, local.first_offset)
    request = AgentRequest(
        files=[FileRead(key=file, path=RunDir(attempt.run_dir).file(file), offset=offset)],
        max_bytes=stop - offset,
        max_bytes_per_file=stop - offset,
    )
    endpoint = account_endpoint(account=attempt.account)
    with pool.session(endpoint) as connection:
        chunk = run_agent(connection, request).files[file]
    if chunk.error:
        raise SSHError(f"Cannot read {file} on the cluster: {chunk.error}", retryable=True)
    data = chunk.data[: stop - offset]
    return LogSlice(offset, offset + len(data), data, local.size, local.first_offset)
