"""Tables: an aligned row of column names (Ultralytics), and the cells of a row under it. Pure."""

from __future__ import annotations

from monitoring.reading.fields import Field
from monitoring.reading.numbers import scan_number
from monitoring.reading.state import MAX_COLUMNS


def is_header(columns: list[str], text: str) -> bool:
    """An aligned row of column names (Ultralytics): 3+ words, every gap two spaces or more."""
    if len(columns) < 3 or len(columns) > MAX_COLUMNS or ":" in text or "=" in text:
        return False
    if not all(c[0].isalpha() for c in columns):
        return False
    stripped = text.strip()
    return all(stripped[i - 1] == " " or stripped[i + 1] == " " for i in _single_gaps(stripped))


def _single_gaps(text: str) -> list[int]:
    return [i for i in range(1, len(text) - 1) if text[i] == " "]


def row_fields(header: list[str], columns: list[str]) -> list[Field]:
    fields: list[Field] = []
    for name, cell in zip(header, columns, strict=True):
        slash = cell.find("/")
        head = cell[:slash] if slash > 0 else cell
        number = scan_number(head, 0)
        if number is None or number.end != len(head) or not number.readable:
            continue
        total = None
        if slash > 0:
            rest = scan_number(cell, slash + 1)
            if rest is None or rest.end != len(cell) or not isinstance(rest.value, int):
                continue
            total = rest.value
        counter = "epoch" if name == "epoch" else None
        fields.append(Field(name, number.value, number.unit, total, counter))
    return fields
