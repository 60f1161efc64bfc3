"""What each poll brings from the run directories: log bytes, metric points, GPU samples.

Registered with the poller as a file watcher: it adds its reads to the poll's
single agent call, stores the new bytes, parses them into series, and after
the commit pushes a delta to the job's WebSocket group.
"""

import fnmatch
import logging
import operator
from collections import defaultdict
from collections.abc import Iterable
from functools import reduce
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models import Q

from clusters.agent import AgentReply, FileChunk, FileRead, ListingRead
from jobs.models import Attempt
from jobs.rundir import (
    GPU_FILE_GLOB,
    METRICS_FILE,
    STDOUT_FILE,
    GpuSeries,
    RunDir,
    file_key,
    gpu_file_node,
    is_gpu_file,
    job_group,
    run_dir_key,
)
from monitoring.gpu import GpuParseError, parse_gpu_line
from monitoring.lines import finish_lines, split_lines
from monitoring.logs import Delivery, Stored, log_files, log_store
from monitoring.models import LogFile, Series
from monitoring.parsers import MetricPoint, parse_metrics_jsonl, parse_stdout_metrics
from monitoring.series import series_append
from monitoring.throughput import dense_transformer_flops_per_token, mfu, token_rate_per_gpu

logger = logging.getLogger(__name__)

FOLLOWED = (STDOUT_FILE, METRICS_FILE)
INLINE_LOG_BYTES = 64 * 1024  # larger deltas carry offsets only; the page reads them over REST
DELTA_POINTS = 2000  # per series per delta
GPU_FIELDS = (
    ("utilization", "utilization"),
    ("memory_used", "memory_used_mib"),
    ("temperature", "temperature_c"),
    ("power", "power_w"),
)

Point = tuple[int, str, float, float]


class MonitoringWatcher:
    def __init__(self) -> None:
        # The states the poll started from, to push a delta when one changes.
        self._states: dict[int, str] = {}

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        followed = [a for a in attempts if a.run_dir]
        self._states.update({a.pk: a.state for a in followed})
        files = log_files(attempt_ids=[a.pk for a in followed], names=FOLLOWED)
        names = _names_by_attempt(files)
        reads = [
            FileRead(
                key=file_key(a.uuid, f.name), path=RunDir(a.run_dir).file(f.name), offset=f.size
            )
            for a in followed
            for f in (files.get((a.pk, n)) for n in names.get(a.pk, FOLLOWED))
            if f is not None
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
        followed = {a.pk: a for a in attempts if a.run_dir}
        if not followed:
            return set()
        files = log_files(attempt_ids=followed, names=())
        _discover_gpu_files(followed.values(), reply, files)
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
        stored = log_store(files=files, deliveries=deliveries)
        points = self._parse(followed, files, stored, unread)
        if points:
            series_append(points=points)
        deltas = self._deltas(followed, stored, points)
        transaction.on_commit(lambda: _push(deltas))
        return unread

    def _parse(
        self,
        attempts: dict[int, Attempt],
        files: dict[tuple[int, str], LogFile],
        stored: list[Stored],
        unread: set[int],
    ) -> list[Point]:
        points: list[Point] = []
        touched: dict[int, LogFile] = {}
        replaced: list[Q] = []
        new_bytes = {(s.log_file.attempt_id, s.log_file.name): s.data for s in stored}
        # metrics.jsonl first: the names it gives are not read from stdout as well.
        ordered = sorted(files.items(), key=lambda item: item[0][1] != METRICS_FILE)
        for (attempt_id, name), log_file in ordered:
            attempt = attempts.get(attempt_id)
            data = new_bytes.get((attempt_id, name), b"")
            # A finished attempt read to its end: its last line needs no newline.
            final = attempt is not None and attempt.is_finished and attempt_id not in unread
            if attempt is None or not (data or (final and log_file.carry)):
                continue
            lines, log_file.carry = split_lines(bytes(log_file.carry), data)
            if final:
                lines += finish_lines(log_file.carry)
                log_file.carry = b""
            structured = files.get((attempt_id, METRICS_FILE))
            known = set(log_file.metric_names)
            points += _points(attempt, log_file, lines, structured=structured)
            for metric in set(log_file.metric_names) - known:
                replaced.append(Q(attempt_id=attempt_id, name=metric))
            touched[log_file.pk] = log_file
        if replaced:
            # A name metrics.jsonl gives for the first time replaces what stdout gave
            # of it so far (the file holds every point from its first line on).
            Series.objects.filter(reduce(operator.or_, replaced)).delete()
        if touched:
            LogFile.objects.bulk_update(
                touched.values(), ["carry", "last_step", "metric_names", "reader_state"]
            )
        return points

    def _deltas(
        self, attempts: dict[int, Attempt], stored: list[Stored], points: list[Point]
    ) -> list[dict[str, Any]]:
        series: dict[int, dict[str, list[list[float]]]] = defaultdict(lambda: defaultdict(list))
        for attempt_id, name, x, y in points:
            series[attempt_id][name].append([x, y])
        logs = {s.log_file.attempt_id: s for s in stored if s.log_file.name == STDOUT_FILE}
        deltas = []
        for attempt in attempts.values():
            before = self._states.pop(attempt.pk, attempt.state)
            log = logs.get(attempt.pk)
            if before == attempt.state and log is None and attempt.pk not in series:
                continue
            delta: dict[str, Any] = {
                "type": "job.delta",
                "job": attempt.job_id,
                "attempt": attempt.number,
                "state": attempt.state,
            }
            if log is not None:
                end = log.offset + len(log.data)
                delta["log"] = {"file": STDOUT_FILE, "offset": log.offset, "end": end}
                if len(log.data) <= INLINE_LOG_BYTES:
                    delta["log"]["text"] = log.data.decode("utf-8", errors="replace")
            if attempt.pk in series:
                delta["series"] = {n: p[-DELTA_POINTS:] for n, p in series[attempt.pk].items()}
            deltas.append(delta)
        return deltas


def _names_by_attempt(files: dict[tuple[int, str], LogFile]) -> dict[int, list[str]]:
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


def _discover_gpu_files(
    attempts: Iterable[Attempt], reply: AgentReply, files: dict[tuple[int, str], LogFile]
) -> None:
    found = []
    for attempt in attempts:
        listing = reply.listings.get(run_dir_key(attempt.uuid))
        if listing is None or listing.error:
            continue
        for entry in listing.entries:
            if fnmatch.fnmatch(entry.name, GPU_FILE_GLOB) and (attempt.pk, entry.name) not in files:
                found.append(LogFile(attempt_id=attempt.pk, name=entry.name))
    if found:
        LogFile.objects.bulk_create(found, ignore_conflicts=True)
        for log_file in LogFile.objects.filter(
            attempt_id__in={f.attempt_id for f in found}, name__in={f.name for f in found}
        ):
            files[(log_file.attempt_id, log_file.name)] = log_file


def _points(
    attempt: Attempt, log_file: LogFile, lines: list[str], *, structured: LogFile | None
) -> list[Point]:
    if is_gpu_file(log_file.name):
        return _gpu_points(attempt, log_file.name, lines)
    if log_file.name == METRICS_FILE:
        metrics, bad = parse_metrics_jsonl(lines)
        if bad:
            logger.info("attempt %s: %d unreadable lines in %s", attempt.pk, bad, METRICS_FILE)
        new_names = sorted({m.name for m in metrics} - set(log_file.metric_names))
        if new_names:
            log_file.metric_names = [*log_file.metric_names, *new_names]
    else:
        patterns = [p for p in attempt.job.metric_patterns.splitlines() if p.strip()]
        # The unfinished last line's newest \r segment (a tqdm bar) is read now, provisionally.
        provisional = bytes(log_file.carry).rstrip(b"\r").decode("utf-8", errors="replace")
        metrics = parse_stdout_metrics(
            lines,
            extra_patterns=patterns,
            last_step=log_file.last_step,
            state=log_file.reader_state,
            provisional=provisional,
        )
        # Structured metrics win: a script writing metrics.jsonl often prints the
        # same numbers rounded, and two sources of one series would interleave.
        given = set(structured.metric_names) if structured is not None else set()
        metrics = [m for m in metrics if m.name not in given]
    if metrics:
        log_file.last_step = max(m.step for m in metrics)
    return [(attempt.pk, m.name, float(m.step), m.value) for m in metrics] + _mfu(attempt, metrics)


def _mfu(attempt: Attempt, metrics: list[MetricPoint]) -> list[Point]:
    """Model FLOP utilisation from reported tokens/s, when the spec gives the model size."""
    job = attempt.job
    peak = job.cluster.gpu_peak_bf16_tflops * 1e12
    if not job.model_params or not peak or not job.total_gpus:
        return []
    if any(m.name == "mfu" for m in metrics):
        return []  # an MFU the trainer prints is shown as printed
    flops = dense_transformer_flops_per_token(job.model_params)
    return [
        (
            attempt.pk,
            "mfu",
            float(m.step),
            mfu(
                per_sec=m.value, flops_per_unit=flops, gpus=job.total_gpus, peak_flops_per_gpu=peak
            ),
        )
        for m in metrics
        if token_rate_per_gpu(m.name) is False  # a per-GPU rate would need x GPUs
    ]


def _gpu_points(attempt: Attempt, name: str, lines: list[str]) -> list[Point]:
    node = gpu_file_node(name) or ""
    points: list[Point] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            sample = parse_gpu_line(line)
        except GpuParseError:
            continue
        x = sample.time.timestamp()
        for metric, attribute in GPU_FIELDS:
            value = getattr(sample, attribute)
            if value is not None:
                points.append((attempt.pk, GpuSeries(node, sample.index, metric).name, x, value))
    return points


def _push(deltas: list[dict[str, Any]]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    send = async_to_sync(layer.group_send)
    for delta in deltas:
        try:
            send(job_group(delta["job"]), delta)
        except Exception:  # a lost push is caught up over REST; never fail the poll
            logger.exception("push to job %s failed", delta["job"])
