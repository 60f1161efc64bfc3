"""What a series is, by its name alone: the chart it goes on (the job page's, compare's axis).

One place for the name rules that the job page's charts, compare's units, the runs table's
best eval metric and the straggler check all read; pure, like the rest of the reading.
"""

from __future__ import annotations

import functools
import re

from jobs.rundir import gpu_series
from monitoring.reading.names import evaluation_split
from monitoring.reading.throughput import (
    COMPUTED_MFU,
    PRINTED_MFU,
    SAMPLE_COUNT_NAMES,
    STEP_RATE_NAMES,
    STEP_TIME_NAMES,
    TOKEN_COUNT_NAMES,
    sample_rate_per_gpu,
    token_rate_per_gpu,
)

# The kinds, one chart each on the job page.
LOSS, TOKEN_RATE, SAMPLE_RATE, STEP_RATE, STEP_TIME = (
    "loss",
    "token_rate",
    "sample_rate",
    "step_rate",
    "step_time",
)
TOTAL, MFU, PACE, GPU, OTHER = "total", "mfu", "pace", "gpu", "other"
# Their own charts: a learning rate or gradient norm on the loss axis flattens the loss,
# and evaluation metrics are read apart from training ones.
LEARNING_RATE, GRAD_NORM, EVAL_LOSS, EVAL = "learning_rate", "grad_norm", "eval_loss", "eval"
_TOTAL_NAMES = frozenset(TOKEN_COUNT_NAMES) | frozenset(SAMPLE_COUNT_NAMES)
_LOWER_IS_BETTER = ("loss", "ppl", "perplexity", "error", "err", "wer", "cer")
_PACE = re.compile(r"^steps_per_sec/(?P<node>[^/]+)$")


def pace_node(name: str) -> str | None:
    """The node a per-node pace series (`steps_per_sec/<node>`) is about; None for others."""
    found = _PACE.match(name)
    return found.group("node") if found else None


@functools.lru_cache(maxsize=8192)  # every series name of every running job, every poll
def eval_series(name: str) -> bool | None:
    """None: not an evaluation metric; else whether lower is better (eval_loss, val/acc)."""
    split = evaluation_split(name)
    if split is None:
        return None
    rest = split[1]
    return any(word in rest.split("_") or rest.endswith(word) for word in _LOWER_IS_BETTER)


def series_kind(name: str) -> str:
    """The chart a series belongs on: rates never share an axis with running totals."""
    if gpu_series(name) is not None:
        return GPU
    if pace_node(name) is not None:
        return PACE
    if name in (PRINTED_MFU, COMPUTED_MFU):
        return MFU
    if name in _TOTAL_NAMES:
        return TOTAL
    if token_rate_per_gpu(name) is not None:
        return TOKEN_RATE
    if sample_rate_per_gpu(name) is not None:
        return SAMPLE_RATE
    if name in STEP_RATE_NAMES:
        return STEP_RATE
    if name in STEP_TIME_NAMES:
        return STEP_TIME
    lowered = name.lower()
    lower_is_better = eval_series(name)
    if lower_is_better is not None:
        return EVAL_LOSS if "loss" in lowered else EVAL
    leaf = lowered.rsplit("/", 1)[-1]  # `train/learning_rate`, `optimizer/lr`
    if leaf in ("lr", "learning_rate") or leaf.startswith("lr_") or leaf.endswith("_lr"):
        return LEARNING_RATE  # Lightning's LearningRateMonitor: `lr-Adam` -> lr_adam
    if leaf == "gnorm" or ("grad" in leaf and "norm" in leaf):
        return GRAD_NORM  # fairseq's `gnorm`, `grad_norm`, `gradient_norm`
    if "loss" in lowered:
        return LOSS
    return OTHER
