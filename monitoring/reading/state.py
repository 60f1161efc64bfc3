"""What the stdout reader keeps between lines and between polls, as a small JSON-able dict.

The latest step (and its epoch, level, heading), the epochs and their base, the total
steps, a table header, an open `key = value` block (and the values it held at a poll's
end), the values the latest step was given, the bar drawn last and a record written over
it, the training loop's N, records' places and the shapes of the records the latest step
was given, and the evaluation values a bar's postfix showed last. Every field read back is
checked: the dict is stored on the LogFile row (strict JSON: nan and ±inf are kept as
their names), and a value of the wrong type reads as absent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from monitoring.reading.steps import EpochState

Value = float | int
MAX_GIVEN = 64  # values of the latest step kept between polls
MAX_COLUMNS = 40
MAX_SHAPES = 16  # kinds of step-less record one step is given
MAX_SLOTS = 256  # records' places held for a burst (an 8 KiB buffer holds ~90 Trainer dicts)
_NON_FINITE = ("nan", "inf", "-inf")


@dataclass
class ReaderState:
    step: int | None = None  # latest step (from a counter, or an epoch standing in)
    step_epoch: int | None = None  # the epoch printed with it
    seen_counter: bool = False
    counted: int | None = None  # last step given to a step-less point by counting
    epochs: EpochState = field(default_factory=EpochState)
    total_steps: int | None = None
    loop: int | None = None  # N of the training loop's `i/N` progress (the first to advance)
    loop_done: bool = False  # its count reached N
    loop_used: bool = False  # a value other than its rate came with it
    header: list[str] = field(default_factory=list)
    block: int | None = None
    blocks: int = 0
    heading: bool = False  # the latest step line was a heading (`[batch=100/4800]:`)
    after_error: bool = False  # an error report came after the latest step line
    level: str = ""  # the log level the latest step line was printed at
    given_step: int | None = None  # the step of the latest point given, and its values
    given: dict[str, Value] = field(default_factory=dict)
    held: dict[str, Value] = field(default_factory=dict)  # the open block's values so far
    drawn: int | None = None  # N of the bar whose redraw was the latest text read
    cleared: bool = False  # a blank redraw cleared that bar since (tqdm.write)
    bar: int | None = None  # N of the training bar drawn last, whatever text came since
    # A step-less record written over the cleared bar, until the next text says whether the
    # bar's refresh is ahead of `record_step` (the step it was written at): its values, bar N.
    record: dict[str, Value] = field(default_factory=dict)
    record_step: int | None = None
    record_bar: int | None = None
    # Steps at which records were written to a stream that holds them back (`reader._slot`),
    # oldest first, for the records of the burst to come; lost: more than MAX_SLOTS were.
    slots: list[int] = field(default_factory=list)
    slots_lost: bool = False
    # Shapes (crc32 of the text but its numbers) of the step-less records the latest step was
    # given; a burst: one came again before any progress, its place unknown; unplaced: the
    # records left out so.
    shapes: list[int] = field(default_factory=list)
    burst: bool = False
    unplaced: int = 0
    postfix: dict[str, Value] = field(default_factory=dict)  # a bar's postfix values given last

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "step_epoch": self.step_epoch,
            "seen_counter": self.seen_counter,
            "counted": self.counted,
            "epoch": self.epochs.epoch,
            "epoch_base": self.epochs.base,
            "epochs": self.epochs.epochs,
            "total_steps": self.total_steps,
            "loop": self.loop,
            "loop_done": self.loop_done,
            "loop_used": self.loop_used,
            "header": self.header[:MAX_COLUMNS],
            "heading": self.heading,
            "after_error": self.after_error,
            "level": self.level,
            "given_step": self.given_step,
            "given": _stored(self.given),
            "block": self.block,
            "blocks": self.blocks,
            "held": _stored(self.held),
            "drawn": self.drawn,
            "cleared": self.cleared,
            "bar": self.bar,
            "record": _stored(self.record),
            "record_step": self.record_step,
            "record_bar": self.record_bar,
            "slots": self.slots[:MAX_SLOTS],
            "slots_lost": self.slots_lost,
            "shapes": self.shapes[:MAX_SHAPES],
            "burst": self.burst,
            "unplaced": self.unplaced,
            "postfix": _stored(self.postfix),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> ReaderState:
        data = data or {}

        def number(key: str) -> int | None:
            value = data.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else None

        header = data.get("header")
        return cls(
            step=number("step"),
            step_epoch=number("step_epoch"),
            seen_counter=data.get("seen_counter") is True,
            counted=number("counted"),
            epochs=EpochState(number("epoch"), number("epoch_base"), number("epochs")),
            total_steps=number("total_steps"),
            loop=number("loop"),
            loop_done=data.get("loop_done") is True,
            loop_used=data.get("loop_used") is True,
            header=[str(h) for h in header] if isinstance(header, list) else [],
            heading=data.get("heading") is True,
            after_error=data.get("after_error") is True,
            level=str(data.get("level") or "")[:16],
            given_step=number("given_step"),
            given=_values(data.get("given")),
            block=number("block"),
            blocks=number("blocks") or 0,
            held=_values(data.get("held")),
            drawn=number("drawn"),
            cleared=data.get("cleared") is True,
            bar=number("bar"),
            record=_values(data.get("record")),
            record_step=number("record_step"),
            record_bar=number("record_bar"),
            slots=_steps(data.get("slots")),
            slots_lost=data.get("slots_lost") is True,
            shapes=_steps(data.get("shapes"))[:MAX_SHAPES],
            burst=data.get("burst") is True,
            unplaced=number("unplaced") or 0,
            postfix=_values(data.get("postfix")),
        )


def _steps(data: object) -> list[int]:
    if not isinstance(data, list):
        return []
    return [s for s in data[:MAX_SLOTS] if isinstance(s, int) and not isinstance(s, bool)]


def _stored(values: dict[str, Value]) -> dict[str, Value | str]:
    """Values as strict JSON holds them: nan and ±inf (a diverged loss) as their names."""
    return {k: v if math.isfinite(v) else str(v) for k, v in values.items()}


def _values(data: object) -> dict[str, Value]:
    if not isinstance(data, dict):
        return {}
    return {
        str(k)[:100]: float(v) if v in _NON_FINITE else v
        for k, v in list(data.items())[:MAX_GIVEN]
        if (isinstance(v, int | float) and not isinstance(v, bool)) or v in _NON_FINITE
    }
