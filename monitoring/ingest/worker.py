"""The metric parser's own process: what a job wrote is parsed here, never in the poll.

A line can make a regular expression take a minute, and Python cannot interrupt
a match; a process can be killed. The poll (`monitoring.ingest.budget`) sends a
poll's requests in one frame and reads one reply frame per request as it is written,
killing this process when an attempt's requests take longer than its budget.
Requests and replies are length-prefixed JSON on stdin/stdout.

Caps on what one line or record may give are applied here too, so an attempt's
output is bounded before it reaches the database.
"""

import math
import sys
from collections.abc import Iterator, Sequence
from typing import Any, BinaryIO

from jobs.params import params_clean
from monitoring.reading.parsers import MetricPoint, jsonl_record, parse_stdout_metrics
from monitoring.records.request import KIND as RECORDS
from monitoring.records.request import records_reply
from portal_lib.fast_json import dumps, loads

# Metric names one stdout line (one run of points at a step) or one metrics.jsonl
# record may give; the rest are dropped and counted.
MAX_NAMES_PER_LINE = 50
# A longer stdout line is stored but not read for metrics: the built-in patterns
# are not linear on any line, and no trainer prints metrics on 4 KiB lines.
MAX_METRIC_LINE_CHARS = 4096
READY = {"ready": True}

Reply = dict[str, Any]


def stdout_request(
    lines: list[str],
    *,
    redraw: str,
    state: dict[str, Any] | None,
    last_step: int | None,
    patterns: Sequence[str] = (),
    final: bool,
) -> dict[str, Any]:
    """The request for a stdout file's new lines (`monitoring.reading.lines.read_chunk` gives them).

    `redraw`, the newest finished `\\r` redraw of the unfinished last line (a tqdm bar), is
    read now, provisionally: it is not read again when the same text later ends the line.
    """
    return {
        "kind": "stdout",
        "lines": lines,
        "patterns": list(patterns),
        "last_step": last_step,
        "state": state,
        "provisional": redraw,
        "final": final,
    }


def _stdout(request: dict[str, Any]) -> Reply:
    lines = request["lines"]
    kept = [line for line in lines if len(line) <= MAX_METRIC_LINE_CHARS]
    state = dict(request.get("state") or {})
    provisional = request.get("provisional", "")
    points = parse_stdout_metrics(
        kept,
        extra_patterns=request.get("patterns", ()),
        last_step=request.get("last_step"),
        state=state,
        provisional=provisional if len(provisional) <= MAX_METRIC_LINE_CHARS else "",
        final=request.get("final", True) is True,
    )
    capped, dropped = _cap_runs(points)
    return {
        "points": capped,
        "bad": 0,
        "long": len(lines) - len(kept),
        "dropped": dropped,
        "state": state,
    }


def _cap_runs(points: list[MetricPoint]) -> tuple[list[list[Any]], int]:
    """At most MAX_NAMES_PER_LINE names in each run of consecutive points at one step."""
    out: list[list[Any]] = []
    dropped = 0
    run_step: int | None = None
    names: set[str] = set()
    for point in points:
        if point.step != run_step:
            run_step, names = point.step, set()
        if point.name not in names and len(names) >= MAX_NAMES_PER_LINE:
            dropped += 1
            continue
        names.add(point.name)
        out.append([point.name, point.step, _wire(point.value), point.time])
    return out, dropped


def _wire(value: float) -> float | str:
    """A value as the frame carries it: JSON has no NaN or infinity (orjson writes null), so
    those go as text that the poll's `float()` reads back ("nan", "inf", "-inf")."""
    return value if math.isfinite(value) else repr(value)


def _jsonl(request: dict[str, Any]) -> Reply:
    out: list[list[Any]] = []
    bad = dropped = 0
    logged: dict[str, object] = {}
    for line in request["lines"]:
        record = jsonl_record(line, logged)
        if not record:
            bad += record is None
            continue
        step, time, values = record
        # A JSON object's names are distinct: only their number can be over the cap.
        dropped += max(len(values) - MAX_NAMES_PER_LINE, 0)
        out += [[name, step, _wire(value), time] for name, value in values[:MAX_NAMES_PER_LINE]]
    # Capped here (jobs.params): what reaches the poll is at most MAX_PARAMS short entries.
    params, _ = params_clean(logged)
    return {"points": out, "bad": bad, "long": 0, "dropped": dropped, "params": params}


def parse_request(request: dict[str, Any]) -> Reply:
    """Points ([name, step, value, time]) and counts for one file's new lines."""
    if request["kind"] == RECORDS:
        return records_reply(request)
    return _jsonl(request) if request["kind"] == "jsonl" else _stdout(request)


def write_frame(stream: BinaryIO, message: object) -> None:
    body = dumps(message)  # a non-finite value is text by now (`_wire`)
    stream.write(len(body).to_bytes(8, "big") + body)
    stream.flush()


def _frames(stream: BinaryIO) -> Iterator[list[dict[str, Any]]]:
    """Each frame's requests: a poll sends a list of them (a single request is a list of one)."""
    while header := stream.read(8):
        frame = loads(stream.read(int.from_bytes(header, "big")))
        yield frame if isinstance(frame, list) else [frame]


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    write_frame(stdout, READY)
    for requests in _frames(stdin):
        for request in requests:
            try:
                reply = parse_request(request)
            except Exception as exc:  # the poll marks the attempt; this process goes on
                reply = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            # One frame per reply, written at once: the poll times each attempt's
            # requests from the reply before them, and a reply held back behind a
            # request that never ends would be charged to the wrong attempt.
            write_frame(stdout, reply)


if __name__ == "__main__":
    main()
