"""Progress from what the job printed: the furthest step the ingest read from its files.

The ingest keeps on each followed file's row the highest step that file gave
(`LogFile.last_step`: stdout, metrics.jsonl; `RecordFile.last_step`: the trainers' own
record files, TensorBoard events and the like), so a job that never calls the heartbeat
helper and labels no rank still has progress, and so a hang. `output_steps` is the one
read of it: a new source of steps keeps its highest step on its file's row, and is read
here.
"""

from collections.abc import Collection
from dataclasses import dataclass

from django.db.models import Max

from jobs.rundir import STDOUT_FILE
from monitoring.logs.store import log_tail
from monitoring.models import LogFile, RecordFile
from monitoring.reading.prefixes import strip_ansi

LAST_LINE_CHARS = 200  # of the evidence line
_TAIL_BYTES = 4096  # read for it: the last line is at most this far back
_TAIL_LINES = 20  # blank lines a job may print after its last words


@dataclass(frozen=True)
class OutputSteps:
    step: int | None = None  # the highest step any of its files gave
    read: bool = True  # False: its output is no longer read for metrics (its parse budget)


def output_steps(*, attempt_ids: Collection[int]) -> dict[int, OutputSteps]:
    """The furthest step each attempt's files gave so far (two queries)."""
    ids = list(attempt_ids)
    rows = (
        LogFile.objects.filter(attempt_id__in=ids)
        .values("attempt_id", "attempt__ingest__metrics_stopped")
        .annotate(top=Max("last_step"))
    )
    found = {
        row["attempt_id"]: OutputSteps(row["top"], not row["attempt__ingest__metrics_stopped"])
        for row in rows
    }
    records = (
        RecordFile.objects.filter(attempt_id__in=ids, last_step__isnull=False)
        .values_list("attempt_id")
        .annotate(top=Max("last_step"))
    )
    for attempt_id, top in records:
        seen = found.get(attempt_id, OutputSteps())
        furthest = top if seen.step is None else max(top, seen.step)
        found[attempt_id] = OutputSteps(furthest, seen.read)
    return found


def steps_are_records(*, attempt_id: int) -> bool:
    """Whether the attempt's steps only number its records: no file gave a step of its own,
    and the stdout reader counted step-less records (`monitoring.reading.state.ReaderState`:
    no `step` read, `counted` set)."""
    if RecordFile.objects.filter(attempt_id=attempt_id, last_step__isnull=False).exists():
        return False
    rows = LogFile.objects.filter(attempt_id=attempt_id, last_step__isnull=False).values_list(
        "name", "reader_state__step", "reader_state__counted"
    )
    found = list(rows)
    return bool(found) and all(
        name == STDOUT_FILE and step is None and counted is not None
        for name, step, counted in found
    )


def last_line(*, attempt_id: int) -> str:
    """The last line the job printed (a bar's newest redraw), printable and capped: a hang's
    evidence. Reads at most a few kilobytes of the stored log's end."""
    tail = log_tail(
        attempt_id=attempt_id, file=STDOUT_FILE, lines=_TAIL_LINES, max_bytes=_TAIL_BYTES
    )
    for line in reversed(tail.data.decode("utf-8", errors="replace").split("\n")):
        for segment in reversed(line.split("\r")):
            text = "".join(c for c in strip_ansi(segment) if c.isprintable()).strip()
            if text:
                return text if len(text) <= LAST_LINE_CHARS else text[:LAST_LINE_CHARS] + "…"
    return ""
