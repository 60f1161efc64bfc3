"""Series names from printed labels, by tests/corpus/README.md's naming convention.

`lm loss` -> lm_loss, `SamplesPerSec` -> samples_per_sec, `decode.loss_ce` ->
decode_loss_ce, `samples/sec` -> samples_per_sec, `train/loss` stays a namespace,
`mAP50-95` -> map50_95. Units never enter a name. Pure and linear.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from monitoring.reading.numbers import PER_UNITS, UNITS

MAX_NAME_LENGTH = 100
# Counters are the x of a point, never a series; the rest are ids or durations.
COUNTERS = frozenset(
    {"step", "steps", "iter", "iteration", "global_step", "num_updates", "update", "batch"}
)
GLOBAL_COUNTERS = frozenset({"global_step", "num_updates"})
NOT_METRICS = frozenset(
    {"v_num", "rank", "local_rank", "global_rank", "pid", "port", "eta", "version", "elapsed"}
)
# A series measured at evaluation: `eval_loss`, `val/acc`, `valid_ppl`, `test_f1`, `dev/loss`.
EVAL_PREFIXES = ("eval", "val", "valid", "validation", "test", "dev")
UNIT_WORDS = UNITS | PER_UNITS | frozenset({"sec", "seconds", "tflop/s/gpu", "tflop/s"})


def _split_camel(word: str) -> str:
    """`SamplesPerSec` -> samples_per_sec, `TFLOPs` -> tflops, `mAP50` -> map50."""
    out: list[str] = []
    lower_run = 0
    for index, char in enumerate(word):
        if char.isupper() and out and (lower_run >= 2 or (index > 1 and word[index - 1].isdigit())):
            out.append("_")
        out.append(char.lower())
        lower_run = lower_run + 1 if char.islower() else 0
    return "".join(out)


def _part(word: str) -> str:
    """One `/`-free piece: camel split, `-` `.` `(` `)` become `_`."""
    text = _split_camel(word)
    cleaned = [c if c.isalnum() else "_" for c in text]
    return "_".join(piece for piece in "".join(cleaned).split("_") if piece)


def normalise_word(word: str) -> str:
    """A printed key: `/` before a per-unit reads `per`; any other `/` is a namespace."""
    pieces = [p for p in word.split("/")]
    out = _part(pieces[0])
    for piece in pieces[1:]:
        name = _part(piece)
        if not name:
            continue
        if name in PER_UNITS:
            out = f"{out}_per_{name}" if out else f"per_{name}"
        else:
            out = f"{out}/{name}" if out else name
    return out


def label_name(words: Sequence[str]) -> tuple[str, str]:
    """(name, unit) of a label's words; a trailing `in <unit>` is the unit, not the name."""
    return _label_name(tuple(words))


@lru_cache(maxsize=4096)
def _label_name(words: tuple[str, ...]) -> tuple[str, str]:
    unit = ""
    if len(words) >= 3 and words[-2].lower() == "in" and words[-1].lower() in UNIT_WORDS:
        unit, words = words[-1], words[:-2]
    parts = [normalise_word(w) for w in words]
    name = "_".join(p for p in parts if p)
    return name[:MAX_NAME_LENGTH], unit


def rate_name(unit: str) -> str:
    """A value with a rate unit and no label is named after the unit: `it/s` -> it_per_s."""
    return normalise_word(unit.replace(" ", ""))


def counter_word(words: Sequence[str]) -> str | None:
    """The counter a label names: `step`, `Training epoch` -> epoch, `Iter(train)` -> iter."""
    return _counter_word(tuple(words))


@lru_cache(maxsize=4096)
def _counter_word(words: tuple[str, ...]) -> str | None:
    if not words:
        return None
    whole, _ = label_name(words)
    if whole in COUNTERS or whole == "epoch":
        return whole
    last = _part(words[-1].split("(")[0])
    if len(words) == 2 and (last in COUNTERS - {"steps", "batch"} or last == "epoch"):
        return last
    # Prose that says where it happened: `done at step 200`, `Saved model at epoch 3`.
    prose = len(words) >= 3 and words[-2].lower() in ("at", "@")
    if prose and (last in COUNTERS - {"steps", "batch"} or last == "epoch"):
        return last
    return None


def evaluation_split(name: str) -> tuple[str, str] | None:
    """(prefix, rest) of an evaluation series' name (`val/acc` -> ('val', 'acc')), else None."""
    head, _, rest = name.lower().replace("/", "_").partition("_")
    return (head, rest) if head in EVAL_PREFIXES and rest else None
