"""The step of a line from its counters: global counters, `step N`, `[i/N]`, bars, epochs.

A counter scoped to an epoch gives (epoch - epoch_base) * N + i; the base is inferred
from the first epoch seen (0 when it is 0 or the framework counts from 0). A global
counter (num_updates, global_step) wins over an epoch-scoped one. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from monitoring.reading.fields import Field
from monitoring.reading.names import GLOBAL_COUNTERS, NOT_METRICS

# A bar whose description says it is not training: evaluation, data preparation.
NOT_TRAINING = (
    "validat",
    "eval",
    "test",
    "predict",
    "sanity",
    "map",
    "filter",
    "tokeniz",
    "download",
    "load",
    "generat",
    "extract",
)
Value = float | int


@dataclass
class Steps:
    """What one line says about steps, and its metric values."""

    step: int | None = None
    from_counter: bool = False  # a real counter (not an epoch standing in for one)
    epoch: int | None = None
    total: int | None = None
    of: int | None = None  # N of the `i/N` fraction the step was counted from
    count: int | None = None  # i of that fraction
    values: dict[str, Value] = field(default_factory=dict)
    metric_fields: int = 0  # fields that name a metric, nan ones included
    skip: bool = False


@dataclass
class EpochState:
    epoch: int | None = None  # from a lone `Epoch 3/10` line
    base: int | None = None
    epochs: int | None = None


def _integral(value: Value | None) -> int | None:
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer() and value >= 0:
        return int(value)
    return None


def _base(epochs: EpochState, epoch: int, zero_based: bool) -> int:
    if epochs.base is None or epoch == 0:
        epochs.base = 0 if epoch == 0 or zero_based else 1
    return epochs.base


def resolve(fields: list[Field], bar: int | None, epochs: EpochState, *, zero_based: bool) -> Steps:
    """The step, epoch and values of one line's fields."""
    out = Steps()
    global_step = plain = None
    fraction: Field | None = None
    epoch_field: Field | None = None
    before_fraction: Field | None = None
    desc_ints: list[int] = []
    previous: Field | None = None
    for index, item in enumerate(fields):
        in_desc = bar is not None and index < bar
        counter = item.counter
        if item.name in NOT_METRICS:
            pass
        if counter == "epoch" and not isinstance(item.value, int):
            counter = None  # `'epoch': 0.53`: Hugging Face's fractional epoch is a value
        elif counter is not None and _integral(item.value) is None:
            counter = None  # `iteration: 1523.4`: a measurement, not a count
        if item.name in NOT_METRICS:
            pass
        elif (counter == "epoch" or item.name == "epoch") and isinstance(item.value, int):
            if epoch_field is None:
                epoch_field = item
        elif counter in GLOBAL_COUNTERS or item.name in GLOBAL_COUNTERS:
            if global_step is None:
                global_step = _integral(item.value)
        elif counter is not None and item.total is None:
            if plain is None:
                plain = _integral(item.value)
        elif counter is not None or (not item.name and item.total is not None):
            better = fraction is None or (fraction.counter is None and counter is not None)
            if better and not (in_desc and counter is None):
                fraction, before_fraction = item, previous
        elif in_desc and not item.name and isinstance(item.value, int):
            desc_ints.append(item.value)
        elif item.name and (counter is None or counter == "epoch"):
            out.metric_fields += 1
            if item.value is not None and item.name not in out.values:
                out.values[item.name] = item.value
        previous = item
    epoch = epoch_field.value if epoch_field is not None else None
    if epoch_field is not None and epoch_field.total is not None:
        epochs.epochs = epoch_field.total + zero_based  # `Epoch 2/2` from 0: three epochs
    if epoch is None and desc_ints:
        epoch = desc_ints.pop(0)
    if plain is None and desc_ints:
        plain = desc_ints[0]
    if fraction is not None and fraction.then_comma and fraction is fields[0]:
        plain, fraction = fraction.total, None  # DeepSpeed's `epoch/step,`
    if (
        fraction is not None
        and epoch is None
        and fraction.counter is None
        and before_fraction is not None
        and before_fraction.name in out.values
        and _integral(before_fraction.value) is not None
    ):
        epoch = _integral(before_fraction.value)  # `Train: 0 [ 100/1251]`, `Train: 1/3 [49/323]`
        out.values.pop(before_fraction.name)
        out.metric_fields -= 1
    if epoch is None and fraction is not None and fraction.counter is None:
        epoch = epochs.epoch
    out.epoch = epoch if isinstance(epoch, int) else None
    epoch = out.epoch
    if global_step is not None:
        out.step, out.from_counter = global_step, True
    elif plain is not None:
        out.step, out.from_counter = plain, True
    elif fraction is not None and isinstance(fraction.value, int) and fraction.total is not None:
        out.from_counter, out.of, out.count = True, fraction.total, fraction.value
        if epoch is not None:
            base = _base(epochs, epoch, zero_based)
            out.step = (epoch - base) * fraction.total + fraction.value
            if epochs.epochs:
                out.total = epochs.epochs * fraction.total  # `Epoch [2/5]`: 5 epochs of N
        else:
            out.step, out.total = fraction.value, fraction.total
    if epoch is not None:
        _base(epochs, epoch, zero_based)
        out.values["epoch"] = epoch
    return out
