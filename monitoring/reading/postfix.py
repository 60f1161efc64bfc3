"""Values a progress bar's postfix repeats on every redraw. Pure."""

from __future__ import annotations

from monitoring.reading.fields import LineFields
from monitoring.reading.names import evaluation_split
from monitoring.reading.state import MAX_GIVEN, Value


def repeated_dropped(shown: dict[str, Value], found: LineFields, values: dict[str, Value]) -> None:
    """Drop from `values` an evaluation value of the bar's postfix that did not change since
    `shown` (updated): the bar repeats it on every redraw until the next evaluation
    (Lightning's `val_loss`), which is no evaluation at each step. A training value is the
    step's, even when it repeats."""
    for item in found.fields[found.bar or 0 :]:
        if item.name not in values or evaluation_split(item.name) is None:
            continue
        if shown.get(item.name) == values[item.name]:
            del values[item.name]
        elif item.name in shown or len(shown) < MAX_GIVEN:
            shown[item.name] = values[item.name]
