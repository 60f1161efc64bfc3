"""One record file's new bytes as a parser request and its reply (`monitoring.ingest.worker`)."""

import base64
import math
from typing import Any

from monitoring.records.names import CSV, TFEVENTS, TRAINER_STATE
from monitoring.records.tables import read_csv, read_trainer_state
from monitoring.records.tfevents import read_events

KIND = "records"


def records_request(*, kind: str, data: bytes, header: list[str]) -> dict[str, Any]:
    return {
        "kind": KIND,
        "format": kind,
        "data": base64.b64encode(data).decode("ascii"),
        "header": header,
    }


def records_reply(request: dict[str, Any]) -> dict[str, Any]:
    """Points ([name, step, value, time]), how many bytes were read in whole, what was skipped."""
    data = base64.b64decode(request["data"])
    kind = request["format"]
    if kind == TFEVENTS:
        events = read_events(data)
        points, consumed, header = events.points, events.consumed, []
        bad = events.skipped_records + (events.skipped_bytes > 0)
    elif kind in (CSV, TRAINER_STATE):
        table = read_csv(data, request["header"]) if kind == CSV else read_trainer_state(data)
        points, consumed, header, bad = table.points, table.consumed, table.header, table.bad
    else:
        raise ValueError(f"no reader for {kind!r}")
    return {
        "points": [[name, step, _wire(value), None] for name, step, value in points],
        "bad": bad,
        "long": 0,
        "dropped": 0,
        "consumed": consumed,
        "header": header,
    }


def _wire(value: float) -> float | str:
    """NaN and infinities as text, as the stdout reader's frame carries them
    (`monitoring.ingest.worker`): JSON holds neither, and the poll's `float()` reads it back."""
    return value if math.isfinite(value) else repr(value)
