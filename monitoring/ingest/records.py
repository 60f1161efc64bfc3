"""Trainers' own record files (TensorBoard events, metrics.csv, trainer_state.json), each poll.

A watcher beside the stdout one, in the same agent call. A bounded find (the agent's)
looks for record files written since the attempt started, in the command's working
directory (`jobs.rundir.WORKDIR_FILE`) and its run directory: soon after the start, then
at doubling intervals up to SEARCH_EVERY seconds, and once more after the attempt ended.
An ended attempt's files are complete (`jobs.poll.cycle`) only after that last find and
once every file it knows is read to its end: loggers that write or flush their file as
the job ends (Lightning's TensorBoard logger, HF's `save_state`) are charted too.

Each known file is read from its offset, within the account's byte budget like the logs,
and parsed in the parser process within the attempt's budget: a tenant's files cost that
tenant only, and no bytes are stored. A file read again from its start (a CSV
rewritten with a wider header, a truncated file, a new trainer_state.json) gives steps at
or below its last one, which replace the stored points (the overwrite rule) rather than
repeat them.

The record is the metric's source up to the last step it gave: the first file to give a
name (events before metrics.csv before trainer_state.json) claims it in
`AttemptIngest.series_sources`, and `record_steps` keeps that step. Stdout's points at or
below it are deleted and no longer stored (`monitoring.ingest.parse`); those past it are
stored on the same series, so the curve stays live between a trainer's checkpoints, until
the record reaches them and takes them over. The page names the source, and the record's
points go out on the live stream as stdout's do.
"""

import logging
import math
import time
from collections import defaultdict
from dataclasses import dataclass, field

from django.db import transaction

from clusters.agent import AgentReply, FileChunk, FileRead, ListingRead
from jobs.models import Attempt
from jobs.poll.push import push_built
from jobs.rundir import WORKDIR_FILE, RunDir
from monitoring.ingest.budget import ParseFailed, ParseTimeout, parse_groups
from monitoring.ingest.parse import _within_series_cap
from monitoring.ingest.watch import job_deltas
from monitoring.ingest.write import ingest_notes
from monitoring.models import AttemptIngest, RecordFile, RecordSearch
from monitoring.reading.overwrite import newest_per_step
from monitoring.records.cadence import SEARCH_EVERY as CADENCE_EVERY
from monitoring.records.cadence import SEARCH_FIRST as CADENCE_FIRST
from monitoring.records.cadence import search_due
from monitoring.records.names import (
    CSV,
    PATTERNS,
    PRIORITY,
    SOURCES,
    TRAINER_STATE,
    record_kind,
    record_name,
)
from monitoring.records.request import records_request
from monitoring.series.overwrite import series_delete, series_delete_range, series_overwrite
from monitoring.series.points import Point
from monitoring.series.write import series_append

logger = logging.getLogger(__name__)

# Module names, so a test can shorten them (monitoring.records.cadence).
SEARCH_EVERY, SEARCH_FIRST = CADENCE_EVERY, CADENCE_FIRST
SEARCH_DEPTH = 5
SEARCH_VISITS = 2000  # entries a find may look at, per root
MAX_FILES = 16  # record files followed per attempt
# What one poll reads of a file: more than the largest record read (MAX_RECORD_BYTES), so
# a whole one always fits.
READ_BYTES = 1024 * 1024
MAX_WHOLE_BYTES = 4 * 1024 * 1024  # a trainer_state.json larger than this is not read
MAX_HEADER_BYTES = 4096


def _key(attempt: Attempt, what: str) -> str:
    return f"{attempt.uuid}/records/{what}"


class RecordsWatcher:
    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        followed = {a.pk: a for a in attempts if a.run_dir}
        searches = {s.attempt_id: s for s in RecordSearch.objects.filter(attempt_id__in=followed)}
        files = RecordFile.objects.filter(attempt_id__in=followed).order_by("id")
        reads: list[FileRead] = []
        listings: list[ListingRead] = []
        now = time.time()
        for attempt in followed.values():
            search = searches.get(attempt.pk)
            if attempt.started_at is None:
                continue
            run_dir = RunDir(attempt.run_dir)
            if search is None or not search.workdir:
                reads.append(
                    FileRead(_key(attempt, "workdir"), run_dir.file(WORKDIR_FILE), 0, 4096)
                )
            since = attempt.started_at.timestamp()
            if search is not None and _find_due(attempt, search, since=since, now=now):
                own = search.workdir and search.workdir != attempt.run_dir
                roots = [attempt.run_dir, *([search.workdir] if own else [])]
                listings += [
                    ListingRead(
                        _key(attempt, f"find{at}"),
                        root,
                        patterns=tuple(PATTERNS),
                        since=since,
                        depth=SEARCH_DEPTH,
                        visits=SEARCH_VISITS,
                    )
                    for at, root in enumerate(roots)
                ]
        for record in files:
            attempt = followed[record.attempt_id]
            reads += _file_reads(attempt, record)
        return reads, listings

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        followed = {a.pk: a for a in attempts if a.run_dir}
        try:
            return _ingest(followed, reply)
        except Exception:  # a record file's trouble never costs the poll its stdout data
            logger.exception("record files of %d attempts failed", len(followed))
            return set()


def _find_due(attempt: Attempt, search: RecordSearch, *, since: float, now: float) -> bool:
    return search_due(
        finished=attempt.is_finished,
        final=search.final,
        searched_at=search.searched_at,
        since=since,
        now=now,
        every=SEARCH_EVERY,
        first=SEARCH_FIRST,
    )


def _file_reads(attempt: Attempt, record: RecordFile) -> list[FileRead]:
    key = _key(attempt, str(record.pk))
    if record.kind == TRAINER_STATE:
        # Rewritten whole: read when a find saw it change, and only if not too large.
        if record.mtime == record.read_mtime or record.size > MAX_WHOLE_BYTES:
            return []
        return [FileRead(key, record.path, 0, MAX_WHOLE_BYTES)]
    reads = [FileRead(key, record.path, record.offset, READ_BYTES)]
    if record.kind == CSV and record.offset:
        # The header again: a rewrite with new columns starts the file anew.
        head = min(len(",".join(record.header)) + 2, MAX_HEADER_BYTES)
        reads.append(FileRead(f"{key}/head", record.path, 0, head))
    return reads


@dataclass
class _Changes:
    """What one poll's record files change in the store, written in one transaction."""

    points: list[Point] = field(default_factory=list)
    repeats: list[tuple[int, str, float]] = field(default_factory=list)  # (attempt, name, x)
    ranges: list[tuple[int, str, float, float]] = field(default_factory=list)  # lo < x <= hi
    claimed: dict[int, list[str]] = field(default_factory=lambda: defaultdict(list))


def _ingest(followed: dict[int, Attempt], reply: AgentReply) -> set[int]:
    searches, changed_searches = _searches(followed, reply)
    records = {r.pk: r for r in RecordFile.objects.filter(attempt_id__in=followed).order_by("id")}
    new_files = _found(followed, reply, searches, changed_searches, records)
    # An ended attempt stays open until its last find ran and its files are read to the end.
    unread = {
        pk
        for pk, a in followed.items()
        if a.is_finished
        and a.started_at is not None
        and not (pk in searches and searches[pk].final)
    }
    unread |= {r.attempt_id for r in new_files if followed[r.attempt_id].is_finished}
    groups: list[list[dict[str, object]]] = []
    order: list[list[RecordFile]] = []
    by_attempt: dict[int, list[RecordFile]] = defaultdict(list)
    for record in records.values():
        by_attempt[record.attempt_id].append(record)
    for attempt_id, rows in by_attempt.items():
        attempt = followed[attempt_id]
        group: list[dict[str, object]] = []
        parsed: list[RecordFile] = []
        for record in rows:
            chunk = reply.files.get(_key(attempt, str(record.pk)))
            if chunk is None:
                if _left(attempt, record):
                    unread.add(attempt_id)
                continue
            head = reply.files.get(_key(attempt, f"{record.pk}/head"))
            data = _data(record, chunk, head)
            if chunk.more or (data is None and chunk.error in (None, "truncated")):
                unread.add(attempt_id)  # more to read, or read anew from its start
            if data is None:
                continue
            group.append(records_request(kind=record.kind, data=data, header=record.header))
            parsed.append(record)
        if group:
            groups.append(group)
            order.append(parsed)
    outcomes = parse_groups(groups) if groups else []
    notes = ingest_notes(attempt_ids={rows[0].attempt_id for rows in order})
    changes = _Changes()
    for rows, replies in zip(order, outcomes, strict=True):
        for record, outcome in zip(rows, replies, strict=True):
            note = notes[record.attempt_id]
            if isinstance(outcome, ParseTimeout | ParseFailed):
                note.over_budget += isinstance(outcome, ParseTimeout)
                note.parse_failures += isinstance(outcome, ParseFailed)
                record.offset = record.size  # never the same bytes twice
                continue
            _taken(record, outcome, note, changes)
    with transaction.atomic():
        for search in changed_searches:
            search.save()
        RecordFile.objects.bulk_create(new_files, ignore_conflicts=True)
        for attempt_id, names in changes.claimed.items():
            series_delete(attempt_id=attempt_id, names=names)
        if records:
            RecordFile.objects.bulk_update(
                list(records.values()),
                [
                    "offset",
                    "size",
                    "mtime",
                    "read_mtime",
                    "inode",
                    "header",
                    "last_step",
                    "skipped",
                ],
            )
        series_delete_range(ranges=changes.ranges)
        series_overwrite(repeats=changes.repeats)
        points = newest_per_step(changes.points)
        if points:
            series_append(points=points)
        AttemptIngest.objects.bulk_update(
            list(notes.values()),
            ["series_sources", "record_steps", "series_names", "over_budget", "parse_failures"],
        )
        if points:  # to the open pages as stdout's points go (a step's newest value wins there)
            transaction.on_commit(
                lambda: push_built(lambda watched: job_deltas(followed, [], points, watched))
            )
    return unread


def _searches(
    followed: dict[int, Attempt], reply: AgentReply
) -> tuple[dict[int, RecordSearch], list[RecordSearch]]:
    """The attempts' searches, with the working directories this reply brought."""
    searches = {s.attempt_id: s for s in RecordSearch.objects.filter(attempt_id__in=followed)}
    changed: list[RecordSearch] = []
    for attempt in followed.values():
        chunk = reply.files.get(_key(attempt, "workdir"))
        search = searches.get(attempt.pk)
        if chunk is not None and chunk.error is None and b"\n" in chunk.data:
            workdir = chunk.data.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
            search = search or RecordSearch(attempt=attempt)
            # The account's home (an empty line) is no job's own tree: the run directory
            # alone, and the file is not asked for again each poll.
            search.workdir = workdir if workdir.startswith("/") else attempt.run_dir
            searches[attempt.pk] = search
            changed.append(search)
        elif search is None and attempt.started_at is not None:
            search = searches[attempt.pk] = RecordSearch(attempt=attempt)
            changed.append(search)
    return searches, changed


def _left(attempt: Attempt, record: RecordFile) -> bool:
    """An ended attempt's file this reply did not read that still has bytes to be read."""
    if not attempt.is_finished or not _file_reads(attempt, record):
        return False
    return record.kind == TRAINER_STATE or record.offset < record.size


def _found(
    followed: dict[int, Attempt],
    reply: AgentReply,
    searches: dict[int, RecordSearch],
    changed: list[RecordSearch],
    records: dict[int, RecordFile],
) -> list[RecordFile]:
    """New rows for files the finds brought; known ones get their size and time."""
    known = {(r.attempt_id, r.path): r for r in records.values()}
    count: dict[int, int] = defaultdict(int)
    for record in records.values():
        count[record.attempt_id] += 1
    new: list[RecordFile] = []
    for attempt in followed.values():
        roots = [attempt.run_dir, searches[attempt.pk].workdir if attempt.pk in searches else ""]
        for at, root in enumerate(roots):
            listing = reply.listings.get(_key(attempt, f"find{at}"))
            if listing is None or not root:
                continue
            search = searches[attempt.pk]
            search.searched_at = reply.time
            search.final = search.final or attempt.is_finished
            if search not in changed:
                changed.append(search)
            for entry in listing.entries:
                kind = record_kind(entry.name.rsplit("/", 1)[-1])
                path = f"{root.rstrip('/')}/{entry.name}"
                seen = known.get((attempt.pk, path))
                if seen is not None:
                    seen.size, seen.mtime = entry.size, entry.mtime
                elif kind is not None and count[attempt.pk] < MAX_FILES:
                    count[attempt.pk] += 1
                    record = RecordFile(
                        attempt=attempt, path=path, kind=kind, size=entry.size, mtime=entry.mtime
                    )
                    known[(attempt.pk, path)] = record
                    new.append(record)
    return new


def _data(record: RecordFile, chunk: FileChunk, head: FileChunk | None) -> bytes | None:
    """The bytes to parse, after starting the file anew where it was replaced or rewritten."""
    if chunk.error == "truncated" or (
        chunk.error is None and chunk.inode != record.inode and record.inode is not None
    ):
        _restart(record)  # read from the start at the next poll
        record.inode = chunk.inode
        return None
    if chunk.error is not None:
        return None
    record.inode = chunk.inode
    record.size = chunk.size if chunk.size is not None else record.size
    if record.kind == TRAINER_STATE:
        if chunk.more:
            return None  # grew past what one read takes: not read
        record.read_mtime = record.mtime
        return chunk.data
    if (
        record.kind == CSV
        and head is not None
        and head.error is None
        and not _same_header(record, head.data)
    ):
        _restart(record)
        return None
    return chunk.data


def _same_header(record: RecordFile, data: bytes) -> bool:
    line = data.split(b"\n", 1)[0].rstrip(b"\r")
    return b"\n" in data and line.decode("utf-8", "replace").split(",") == record.header


def _restart(record: RecordFile) -> None:
    record.offset, record.header = 0, []


def _taken(
    record: RecordFile, reply: dict[str, object], note: AttemptIngest, changes: _Changes
) -> None:
    """The reply's points, of the names this file's kind may give, into `changes`, with the
    stdout points they take over: every one at or below the record's new last step."""
    if record.kind != TRAINER_STATE:
        record.offset += int(reply["consumed"])  # type: ignore[call-overload]
    record.header = list(reply["header"])  # type: ignore[call-overload]
    record.skipped += int(reply["bad"])  # type: ignore[call-overload]
    sources = dict(note.series_sources)
    steps: dict[str, int] = dict(note.record_steps)
    metrics: list[tuple[str, int, float]] = []
    for name, step, value, _ in reply["points"]:  # type: ignore[attr-defined]
        owner = sources.get(name)
        if owner is None or PRIORITY.index(record.kind) < PRIORITY.index(owner):
            # This file now gives the metric: a lesser file's series of it goes whole, as
            # does stdout's under another name; stdout's own goes up to the record's step.
            sources[name] = record.kind
            changes.claimed[record.attempt_id] += [
                n for n in note.series_names if record_name(n) == name and n != name
            ] + ([name] if owner is not None else [])
            steps.pop(name, None)
        if sources[name] == record.kind:
            metrics.append((name, int(step), float(value)))
    note.series_sources = sources
    metrics = _within_series_cap(metrics, note)
    high = record.last_step
    tops: dict[str, int] = {}
    for name, step, value in metrics:
        changes.points.append((record.attempt_id, name, float(step), value))
        # trainer_state.json holds every step so far, and each checkpoint has its own.
        given = max(high if high is not None else -1, steps.get(name, -1))
        if record.kind == TRAINER_STATE or step <= given:
            changes.repeats.append((record.attempt_id, name, float(step)))
        tops[name] = max(tops.get(name, step), step)
    for name, top in tops.items():
        last = steps.get(name)
        if last is None or top > last:
            below = -math.inf if last is None else float(last)
            changes.ranges.append((record.attempt_id, name, below, float(top)))
            steps[name] = top
    note.record_steps = steps
    if metrics:
        top = max(tops.values())
        record.last_step = top if high is None else max(high, top)


def record_sources(*, attempt_id: int) -> dict[str, str]:
    """By series name, the record file that gives it, in the page's words (none: stdout)."""
    sources = (
        AttemptIngest.objects.filter(attempt_id=attempt_id)
        .values_list("series_sources", flat=True)
        .first()
    )
    return {name: f"from {SOURCES[kind]}" for name, kind in (sources or {}).items()}
