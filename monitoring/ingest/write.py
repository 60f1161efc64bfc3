"""Writing what the poll parsed: one short transaction, and per attempt if that fails.

A write that fails for one attempt's points (a database refusing what its job
wrote) is retried attempt by attempt; the attempt whose write still fails loses
this poll's points, is marked, and has its parser state moved past the bytes,
so the poll never comes back to them and every other attempt's points land.
"""

import logging
from collections.abc import Iterable
from copy import copy
from typing import Any

from django.db import DatabaseError, transaction

from monitoring.ingest.parse import AttemptParse
from monitoring.models import AttemptIngest, LogFile
from monitoring.series.overwrite import series_delete, series_overwrite
from monitoring.series.points import Point
from monitoring.series.write import series_append
from portal_lib.bulk import bulk_update

logger = logging.getLogger(__name__)

_PARSER_STATE = ["carry", "last_step", "metric_names", "parsed_to", "reader_state"]
_COUNTERS = [
    "series_names",
    "skipped_bytes",
    "skipped_lines",
    "over_budget",
    "parse_failures",
    "metrics_stopped",
    "dropped_names",
    "dropped_series",
    "dropped_gpu_files",
    "dropped_gpu_samples",
]


def ingest_notes(*, attempt_ids: Iterable[int]) -> dict[int, AttemptIngest]:
    """The attempts' AttemptIngest rows, created where missing."""
    ids = list(attempt_ids)
    notes = {n.attempt_id: n for n in AttemptIngest.objects.filter(attempt_id__in=ids)}
    missing = [AttemptIngest(attempt_id=i) for i in ids if i not in notes]
    if missing:
        AttemptIngest.objects.bulk_create(missing, ignore_conflicts=True)
        notes.update(
            (n.attempt_id, n)
            for n in AttemptIngest.objects.filter(attempt_id__in=[m.attempt_id for m in missing])
        )
    return notes


def _write(parsed: list[AttemptParse], notes: list[AttemptIngest]) -> None:
    with transaction.atomic():
        for result in parsed:
            if result.replaced:
                # A name metrics.jsonl gives for the first time replaces what stdout gave
                # of it so far (the file holds every point from its first line on).
                series_delete(attempt_id=result.attempt_id, names=result.replaced)
        log_files = [f for result in parsed for f in result.log_files]
        bulk_update(LogFile, log_files, _PARSER_STATE)
        points = [p for result in parsed for p in result.points]
        # The overwrite rule: what these points replace goes first (monitoring.reading.overwrite).
        series_overwrite(repeats=[r for result in parsed for r in result.repeats])
        if points:
            series_append(points=points)
        bulk_update(AttemptIngest, notes, _COUNTERS)


def notes_state(notes: dict[int, AttemptIngest]) -> dict[int, tuple[Any, ...]]:
    """The notes' counters as they are now: `ingest_write` writes back those that differ."""
    return {i: _counters(note) for i, note in notes.items()}


def _counters(note: AttemptIngest) -> tuple[Any, ...]:
    return tuple(copy(getattr(note, name)) for name in _COUNTERS)  # a list is copied


def ingest_write(
    parsed: list[AttemptParse],
    notes: dict[int, AttemptIngest],
    loaded: dict[int, tuple[Any, ...]],
) -> list[Point]:
    """Store the parsed points and parser state; returns the points that were stored.

    Of the notes, only those whose counters changed since `loaded` (`notes_state`) are
    written: most polls of most attempts change none.
    """
    changed = {i for i, note in notes.items() if _counters(note) != loaded.get(i)}
    try:
        _write(parsed, [notes[i] for i in sorted(changed)])
        return [p for result in parsed for p in result.points]
    except DatabaseError:
        logger.exception("writing the poll's points failed; writing attempt by attempt")
    stored: list[Point] = []
    for result in parsed:
        note = notes[result.attempt_id]
        try:
            _write([result], [note] if result.attempt_id in changed else [])
            stored += result.points
        except DatabaseError:
            logger.exception("attempt %s: its points cannot be stored", result.attempt_id)
            note.parse_failures += 1
            note.skipped_lines += len(result.points)
            for log_file in result.log_files:
                log_file.carry = b""
            try:
                with transaction.atomic():
                    LogFile.objects.bulk_update(result.log_files, ["carry", "parsed_to"])
                    AttemptIngest.objects.bulk_update([note], _COUNTERS)
            except DatabaseError:
                logger.exception("attempt %s: its parser state cannot be stored", note.attempt_id)
    return stored
