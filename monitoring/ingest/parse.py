"""One attempt's new bytes into metric points: in a time budget, capped, never raising.

Log bytes are stored before this runs; here they are only read for metrics. An
attempt whose lines run past its budget or make the parser fail has them skipped
(counted on its `AttemptIngest`), and parsing goes on from the next bytes: the
same bytes are never parsed twice, and no other attempt waits on them. Bytes a
poll stored and then died before its points were (a killed worker) are read back
from the database by the next poll.
"""

import logging
import math
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from jobs.models import Attempt
from jobs.patterns import pattern_lines
from jobs.rundir import METRICS_FILE, gpu_series, is_gpu_file
from monitoring.ingest.budget import Outcome, ParseFailed, ParseTimeout, parse_groups
from monitoring.ingest.gpu import gpu_points
from monitoring.ingest.worker import stdout_request
from monitoring.logs.store import READ_BYTES_MAX, log_read
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.lines import Chunk, read_chunk
from monitoring.reading.overwrite import newest_per_step
from monitoring.reading.throughput import (
    COMPUTED_MFU,
    PRINTED_MFU,
    dense_transformer_flops_per_token,
    job_tokens_per_step,
    mfu,
    rate_form,
    token_rates,
)
from monitoring.records.names import record_name
from monitoring.series.points import MAX_SERIES_PER_ATTEMPT, Point

logger = logging.getLogger(__name__)

# After this many polls over budget, an attempt's files are stored but no longer parsed.
MAX_OVER_BUDGET = 3
MAX_EXACT_STEP = 2**53  # a chart's x is a float64
# Stored bytes a died poll left unparsed are read back up to this much (a poll reads at
# most READ_BYTES_MAX of a file); a longer gap is skipped.
MAX_GAP_BYTES = 2 * READ_BYTES_MAX


@dataclass
class AttemptParse:
    attempt_id: int
    points: list[Point] = field(default_factory=list)
    log_files: list[LogFile] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)  # names metrics.jsonl now gives
    # (attempt, name, x) of points that replace what an earlier poll may have stored.
    repeats: list[tuple[int, str, float]] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)  # portal_metrics.log_params, capped


@dataclass
class NewBytes:
    offset: int
    data: bytes


def _resync(log_file: LogFile, new: NewBytes, note: AttemptIngest) -> bytes:
    """The bytes to parse: after a gap in parsing, the stored gap first, else from the
    first whole line only."""
    if log_file.parsed_to == new.offset:
        return new.data
    gap = _stored_gap(log_file, new.offset)
    if gap is not None:
        # Stored by a poll that died before its points were (a worker killed mid-poll):
        # still here, so read now, after the carry and in the state they follow.
        return gap + new.data
    # Bytes no longer stored (trimmed, or never): the carry is stale, and
    # the first line here is the tail of one whose start is gone.
    note.skipped_bytes += max(new.offset - log_file.parsed_to, 0)
    log_file.carry = b""
    cut = new.data.find(b"\n") + 1
    note.skipped_bytes += cut
    return new.data[cut:] if cut else b""


def _stored_gap(log_file: LogFile, end: int) -> bytes | None:
    """Bytes [parsed_to, end) of the file as stored, if all of them still are."""
    start = log_file.parsed_to
    if not 0 < end - start <= MAX_GAP_BYTES:
        return None
    stored = log_read(
        attempt_id=log_file.attempt_id, file=log_file.name, offset=start, limit=end - start
    )
    return stored.data if stored.offset == start and len(stored.data) == end - start else None


@dataclass
class ParseInput:
    """One attempt's files and what this poll brought of them."""

    attempt: Attempt
    files: dict[str, LogFile]
    new_bytes: dict[str, NewBytes]
    final: bool  # the attempt ended and its files are read to their end
    note: AttemptIngest


@dataclass
class _Read:
    """One file's new lines, and where the parser's reply for them is (None: no request)."""

    log_file: LogFile
    chunk: Chunk
    data: bytes
    request: int | None


def attempts_parse(inputs: list[ParseInput]) -> list[AttemptParse]:
    """The points of each attempt's new bytes; the LogFile rows' parser state is updated.

    Every attempt's lines go to the parser process together (`parse_groups`), each
    attempt's within its own budget, and come back as one reply per file.
    """
    groups: list[list[dict[str, Any]]] = []
    reads = []
    for given in inputs:
        group: list[dict[str, Any]] = []
        reads.append(_reads(given, group))
        groups.append(group)
    outcomes = parse_groups(groups) if any(groups) else [[] for _ in groups]
    return [
        _points(given, read, outcome)
        for given, read, outcome in zip(inputs, reads, outcomes, strict=True)
    ]


def attempt_parse(
    attempt: Attempt,
    files: dict[str, LogFile],
    new_bytes: dict[str, NewBytes],
    *,
    final: bool,
    note: AttemptIngest,
) -> AttemptParse:
    """One attempt's `attempts_parse`."""
    return attempts_parse([ParseInput(attempt, files, new_bytes, final, note)])[0]


def _reads(given: ParseInput, group: list[dict[str, Any]]) -> list[_Read]:
    """Each file's new lines, in the order they are read; their parse requests go to `group`."""
    reads = []
    # metrics.jsonl first: the names it gives are not read from stdout as well.
    for name in sorted(given.files, key=lambda n: n != METRICS_FILE):
        log_file = given.files[name]
        new = given.new_bytes.get(name)
        if new is None and log_file.parsed_to < log_file.size:
            new = NewBytes(log_file.size, b"")  # stored, never parsed: nothing came since
        if new is None and not (given.final and (log_file.carry or _holds(log_file))):
            continue
        data = _resync(log_file, new, given.note) if new is not None else b""
        if new is not None:
            log_file.parsed_to = new.offset + len(new.data)
        chunk = read_chunk(bytes(log_file.carry), data, final=given.final)
        log_file.carry = chunk.carry
        request = None
        stopped = given.note.metrics_stopped
        if not stopped and not is_gpu_file(name) and _news(log_file, chunk, given.final):
            request = len(group)
            group.append(_request(given.attempt, log_file, chunk, final=given.final))
        reads.append(_Read(log_file, chunk, data, request))
    return reads


def _news(log_file: LogFile, chunk: Chunk, final: bool) -> bool:
    """Whether there is anything to read: lines, an unfinished stdout line's redraw, or
    at the end a held block of `key = value` lines."""
    return bool(chunk.lines) or (
        log_file.name != METRICS_FILE and bool(chunk.redraw or (final and _holds(log_file)))
    )


def _points(given: ParseInput, reads: list[_Read], outcomes: list[Outcome]) -> AttemptParse:
    attempt, note = given.attempt, given.note
    result = AttemptParse(attempt.pk)
    for read in reads:
        log_file, data, lines = read.log_file, read.data, read.chunk.lines
        result.log_files.append(log_file)
        if note.metrics_stopped:
            note.skipped_bytes += len(data)
            continue
        if is_gpu_file(log_file.name):
            result.points += gpu_points(attempt, log_file, lines, note)
            continue
        known = set(log_file.metric_names)
        high = log_file.last_step  # the highest step the file gave before this poll
        metrics = _metrics(
            attempt,
            log_file,
            None if read.request is None else outcomes[read.request],
            given.files.get(METRICS_FILE),
            note,
            params=result.params,
        )
        if metrics is None:
            note.skipped_bytes += len(data)
            note.skipped_lines += len(lines)
            continue
        attempt_id = attempt.pk
        points = [(attempt_id, name, float(step), value) for name, step, value in metrics]
        points += _mfu(attempt, metrics, note)
        result.points += points
        # Steps the file gave before may be stored already (most polls give none of them).
        if high is not None and points and min(map(_X, points)) <= high:
            result.repeats += [(a, series, x) for a, series, x, _ in points if x <= high]
        result.replaced += sorted(set(log_file.metric_names) - known)
    # One value per step and series, the newest (a step a later line gave again).
    result.points = newest_per_step(result.points)
    return result


def _holds(log_file: LogFile) -> bool:
    """The reader holds a block of `key = value` lines that has not ended yet, or a record
    whose bar's refresh has not come yet (`monitoring.reading.reader`)."""
    state = log_file.reader_state
    return isinstance(state, dict) and bool(state.get("held") or state.get("record"))


def _request(attempt: Attempt, log_file: LogFile, chunk: Chunk, *, final: bool) -> dict[str, Any]:
    if log_file.name == METRICS_FILE:
        return {"kind": "jsonl", "lines": chunk.lines}
    return stdout_request(
        chunk.lines,
        redraw=chunk.redraw,
        state=log_file.reader_state,
        last_step=log_file.last_step,
        patterns=pattern_lines(attempt.job.metric_patterns),
        final=final,
    )


Metric = tuple[str, int, float]  # name, step, value: a reply's point as the poll reads it
_X = itemgetter(2)
_STEP = itemgetter(1)


def _metrics(
    attempt: Attempt,
    log_file: LogFile,
    outcome: Outcome | None,
    structured: LogFile | None,
    note: AttemptIngest,
    *,
    params: dict[str, Any],
) -> list[Metric] | None:
    """The file's capped metric points; None when they were skipped (budget, failure)."""
    if outcome is None:
        return []  # nothing new to read
    if isinstance(outcome, ParseTimeout):
        note.over_budget += 1
        note.metrics_stopped = note.over_budget >= MAX_OVER_BUDGET
        logger.warning("attempt %s: %s took over its parse budget", attempt.pk, log_file.name)
        return None
    if isinstance(outcome, ParseFailed):
        note.parse_failures += 1
        logger.warning("attempt %s: parsing %s failed: %s", attempt.pk, log_file.name, outcome)
        return None
    reply = outcome
    if "state" in reply:
        log_file.reader_state = reply["state"]
    params.update(reply.get("params") or {})
    note.skipped_lines += reply["long"]
    note.dropped_names += reply["dropped"]
    # Tens of thousands a poll: tuples, and one pass.
    metrics: list[Metric] = [
        (name, int(step), float(value))
        for name, step, value, _ in reply["points"]
        if abs(step) < MAX_EXACT_STEP
    ]
    note.dropped_names += len(reply["points"]) - len(metrics)
    # A time per step is stored as the rate it stands for (tqdm's `s/it`, Keras's `ms/step`).
    metrics = [(named[0], m[1], named[1]) for m in metrics if (named := rate_form(m[0], m[2]))]
    if reply["bad"]:
        logger.info("attempt %s: %d unreadable lines in %s", attempt.pk, reply["bad"], METRICS_FILE)
    if log_file.name != METRICS_FILE:
        # Structured metrics win: a script writing metrics.jsonl often prints the
        # same numbers rounded, and two sources of one series would interleave.
        given = set(structured.metric_names) if structured is not None else set()
        given.add(COMPUTED_MFU)  # the portal's own series: no job prints into it
        metrics = [m for m in metrics if m[0] not in given]
        if note.series_sources:  # a trainer's own record file gives these (ingest.records)
            metrics = _past_records(metrics, note)
    metrics = _within_series_cap(metrics, note)
    if log_file.name == METRICS_FILE:
        new_names = sorted({m[0] for m in metrics} - set(log_file.metric_names))
        if new_names:
            log_file.metric_names = [*log_file.metric_names, *new_names]
    if metrics:  # the highest step so far: a step at or below it may be stored already
        high = max(map(_STEP, metrics))
        log_file.last_step = high if log_file.last_step is None else max(log_file.last_step, high)
    return metrics


def _past_records(metrics: list[Metric], note: AttemptIngest) -> list[Metric]:
    """Stdout's points of a metric a record file gives: only those past the record's last
    step, on the record's series (it takes them over when it reaches them)."""
    kept = []
    for name, step, value in metrics:
        named = record_name(name)
        if named not in note.series_sources:
            kept.append((name, step, value))
        elif step > note.record_steps.get(named, math.inf):
            kept.append((named, step, value))
    return kept


def _within_series_cap(metrics: list[Metric], note: AttemptIngest) -> list[Metric]:
    """Points of the names the attempt already has, and of new ones while under the cap."""
    known = set(note.series_names)
    if known.issuperset([m[0] for m in metrics]):
        return metrics  # the usual poll: no new name
    refused: set[str] = set()
    kept = []
    for metric in metrics:
        name = metric[0]
        if name not in known and gpu_series(name) is None:
            if len(known) >= MAX_SERIES_PER_ATTEMPT:
                refused.add(name)
                continue
            known.add(name)
            note.series_names = [*note.series_names, name]
        kept.append(metric)
    note.dropped_series += len(refused)
    return kept


def _mfu(attempt: Attempt, metrics: list[Metric], note: AttemptIngest) -> list[Point]:
    """Model FLOP utilisation from the job's token rate, when the spec gives the model size.

    It is its own series (COMPUTED_MFU, a fraction), and only for an attempt whose trainer
    prints no MFU of its own: a printed one is shown as printed and wins for the attempt.
    The token rate is `token_rates`': the step rate times a step's tokens (a logged token
    count, or the sequence length and batch in the job's parameters), else a printed rate.
    """
    job = attempt.job
    peak = job.cluster.gpu_peak_bf16_tflops * 1e12
    if not job.model_params or not peak or not job.total_gpus:
        return []
    if PRINTED_MFU in note.series_names or any(m[0] == PRINTED_MFU for m in metrics):
        return []
    flops = dense_transformer_flops_per_token(job.model_params)
    per_step = job_tokens_per_step(job.params or {}, gpus=job.total_gpus)
    return [
        (
            attempt.pk,
            COMPUTED_MFU,
            float(step),
            mfu(per_sec=rate, flops_per_unit=flops, gpus=job.total_gpus, peak_flops_per_gpu=peak),
        )
        for step, rate in token_rates(metrics, tokens_per_step=per_step)
    ]
