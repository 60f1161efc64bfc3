"""What each poll brings from the run directories: log bytes, metric points, GPU samples.

Registered with the poller as a file watcher: it adds its reads to the poll's
single agent call, stores the new bytes, parses them into series, and after
the commit pushes a delta to the job's WebSocket group.
"""

import logging
import math
from collections import defaultdict
from collections.abc import Collection
from typing import Any

from django.db import transaction

from clusters.agent import AgentReply, FileChunk, FileRead, ListingRead
from jobs.models import Attempt
from jobs.poll.push import push_built
from jobs.rundir import (
    METRICS_FILE,
    STDOUT_FILE,
    RunDir,
    file_key,
    is_gpu_file,
    run_dir_key,
)
from monitoring.alerts.evaluate import alerts_evaluate
from monitoring.ingest.bursts import bursts_count
from monitoring.ingest.figures import ingest_record
from monitoring.ingest.gpu import discover_gpu_files
from monitoring.ingest.parse import AttemptParse, NewBytes, ParseInput, Point, attempts_parse
from monitoring.ingest.write import ingest_notes, ingest_write, notes_state
from monitoring.logs.store import Delivery, Stored, log_files, log_sizes, log_store, read_limit
from monitoring.models import AttemptIngest, LogFile
from monitoring.runs.summary import runs_record
from portal_lib.gc_pause import gc_paused

logger = logging.getLogger(__name__)

FOLLOWED = (STDOUT_FILE, METRICS_FILE)
INLINE_LOG_BYTES = 64 * 1024  # larger deltas carry offsets only; the page reads them over REST
DELTA_POINTS = 2000  # per series per delta


class MonitoringWatcher:
    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        followed = [a for a in attempts if a.run_dir]
        files = log_sizes(attempt_ids=[a.pk for a in followed], names=FOLLOWED)
        names = _names_by_attempt(files)
        reads = [
            FileRead(
                key=file_key(a.uuid, name),
                path=RunDir(a.run_dir).file(name),
                offset=f.size,
                limit=read_limit(f),
            )
            for a in followed
            for name in names.get(a.pk, FOLLOWED)
            if (f := files.get((a.pk, name))) is not None
        ]
        # Listing the run directory finds the per-node GPU files as they appear,
        # until there is one per node.
        gpu_files: dict[int, int] = defaultdict(int)
        for attempt_id, name in files:
            gpu_files[attempt_id] += is_gpu_file(name)
        listings = [
            ListingRead(key=run_dir_key(a.uuid), path=a.run_dir)
            for a in followed
            if a.job.gpus_per_node and not a.is_finished and gpu_files[a.pk] < a.job.nodes
        ]
        return reads, listings

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        with gc_paused():  # tens of thousands of points: see portal_lib.gc_pause
            return self._ingest(attempts, reply)

    def _ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        followed = {a.pk: a for a in attempts if a.run_dir}
        if not followed:
            return set()
        files = log_files(attempt_ids=followed, names=())
        deliveries, unread = [], set()
        names = _names_by_attempt(files)
        for attempt in followed.values():
            for name in names.get(attempt.pk, FOLLOWED):
                chunk = reply.files.get(file_key(attempt.uuid, name))
                if chunk is None:
                    continue
                if chunk.more:
                    unread.add(attempt.pk)
                if chunk.error is None:
                    deliveries.append(_delivery(attempt, name, chunk))
                elif chunk.error != "not found":
                    logger.warning(
                        "cannot read %s of attempt %s: %s", name, attempt.pk, chunk.error
                    )
        # Parser state and counters only for the attempts this poll can change: new bytes,
        # a listing, or an end to read to; an idle job costs its file rows only.
        busy = {d.attempt_id for d in deliveries if d.data}
        active = {
            pk: a
            for pk, a in followed.items()
            if pk in busy or a.is_finished or run_dir_key(a.uuid) in reply.listings
        }
        notes = ingest_notes(attempt_ids=active)
        loaded = notes_state(notes)
        discover_gpu_files(active.values(), reply, files, notes)
        # The bytes first, in their own transaction: whatever parsing them does, they are kept.
        with transaction.atomic():
            stored = log_store(files=files, deliveries=deliveries)
            bursts_count(followed.values(), files, deliveries, stored)
        parsed = self._parse(active, files, stored, unread, notes)
        points = ingest_write(parsed, notes, loaded)
        try:  # the runs table's summaries and logged settings; never the poll's data
            with transaction.atomic():
                params = {r.attempt_id: r.params for r in parsed if r.params}
                runs_record(attempts=followed, points=points, params=params)
        except Exception:
            logger.exception("run summaries of %d attempts failed", len(followed))
        try:  # an alert rule's failure must never cost the poll its data
            alerts_evaluate(attempts=followed.values(), points=points, stored=stored)
        except Exception:
            logger.exception("alert evaluation of %d attempts failed", len(followed))
        # Built once committed, for the jobs with a page open then: a thousand jobs' points
        # regrouped for the one page someone watches cost the poll a tenth of a second.
        transaction.on_commit(
            lambda: push_built(lambda watched: job_deltas(followed, stored, points, watched))
        )
        transaction.on_commit(lambda: ingest_record(points=points, stored=stored))
        return unread

    def _parse(
        self,
        attempts: dict[int, Attempt],
        files: dict[tuple[int, str], LogFile],
        stored: list[Stored],
        unread: set[int],
        notes: dict[int, AttemptIngest],
    ) -> list[AttemptParse]:
        """Each attempt's points, parsed outside any transaction, each in its own time budget."""
        by_attempt: dict[int, dict[str, LogFile]] = defaultdict(dict)
        for (attempt_id, name), log_file in files.items():
            by_attempt[attempt_id][name] = log_file
        new_bytes: dict[int, dict[str, NewBytes]] = defaultdict(dict)
        for s in stored:
            new_bytes[s.log_file.attempt_id][s.log_file.name] = NewBytes(s.offset, s.data)
        # A finished attempt read to its end: its last line needs no newline.
        return attempts_parse(
            [
                ParseInput(
                    attempt,
                    by_attempt.get(attempt_id, {}),
                    new_bytes.get(attempt_id, {}),
                    final=attempt.is_finished and attempt_id not in unread,
                    note=notes[attempt_id],
                )
                for attempt_id, attempt in attempts.items()
            ]
        )


def job_deltas(
    attempts: dict[int, Attempt],
    stored: list[Stored],
    points: list[Point],
    watched: set[int] | None,
) -> list[dict[str, Any]]:
    """The deltas of the jobs in `watched` (every job's when None: Redis cannot say); the
    record files' watcher sends its points in the same shape (`monitoring.ingest.records`)."""
    if watched is not None:
        attempts = {pk: a for pk, a in attempts.items() if a.job_id in watched}
        if not attempts:
            return []
        points = [point for point in points if point[0] in attempts]
    series: dict[int, dict[str, list[list[float | None]]]] = {}
    # A NaN or infinite value goes as [x, null], its x also under "nonfinite" (the
    # series read's shape, `monitoring.series.read`): JSON holds no bare NaN.
    gaps: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for attempt_id, name, x, y in points:  # tens of thousands a poll: plain dicts
        by_name = series.get(attempt_id)
        if by_name is None:
            by_name = series[attempt_id] = {}
        if not math.isfinite(y):
            gaps[attempt_id][name].append(x)
        pairs = by_name.get(name)
        if pairs is None:
            by_name[name] = [[x, y if math.isfinite(y) else None]]
        else:
            pairs.append([x, y if math.isfinite(y) else None])
    logs = {s.log_file.attempt_id: s for s in stored if s.log_file.name == STDOUT_FILE}
    # No state: the state poll pushes each new one (jobs.poll.cycle) and runs beside this
    # one, so a state read here could reach a page after a newer one and take it back.
    deltas = []
    for attempt in attempts.values():
        log = logs.get(attempt.pk)
        if log is None and attempt.pk not in series:
            continue
        delta: dict[str, Any] = {
            "type": "job.delta",
            "job": attempt.job_id,
            "attempt": attempt.number,
        }
        if log is not None:
            end = log.offset + len(log.data)
            delta["log"] = {"file": STDOUT_FILE, "offset": log.offset, "end": end}
            if len(log.data) <= INLINE_LOG_BYTES:
                delta["log"]["text"] = log.data.decode("utf-8", errors="replace")
        if attempt.pk in series:
            delta["series"] = {
                n: p if len(p) <= DELTA_POINTS else p[-DELTA_POINTS:]
                for n, p in series[attempt.pk].items()
            }
        if attempt.pk in gaps:
            delta["nonfinite"] = {n: xs[-DELTA_POINTS:] for n, xs in gaps[attempt.pk].items()}
        deltas.append(delta)
    return deltas


def _names_by_attempt(files: Collection[tuple[int, str]]) -> dict[int, list[str]]:
    """Each attempt's followed file names (the standard ones even before their rows exist)."""
    names: dict[int, set[str]] = defaultdict(lambda: set(FOLLOWED))
    for attempt_id, name in files:
        names[attempt_id].add(name)
    return {attempt_id: sorted(found) for attempt_id, found in names.items()}


def _delivery(attempt: Attempt, name: str, chunk: FileChunk) -> Delivery:
    return Delivery(
        attempt_id=attempt.pk,
        name=name,
        offset=chunk.offset,
        data=chunk.data,
        remote_size=chunk.size,
        inode=chunk.inode,
    )
