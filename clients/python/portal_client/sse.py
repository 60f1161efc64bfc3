"""Server-sent events read from lines of a streamed HTTP response."""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    event: str
    data: Any
    id: str | None


def parse_events(lines: Iterable[str]) -> Iterator[Event]:
    """Events from the stream's lines; comments (keep-alives) are skipped."""
    event, event_id = "message", None
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield Event(event, json.loads("\n".join(data)), event_id)
            event, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            event = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value
