"""Compare's y-axis unit follows the job page's chart kind of a series, never a rule of its own."""

import pytest

from monitoring.reading.kinds import series_kind
from monitoring.reading.throughput import (
    COMPUTED_MFU,
    PRINTED_MFU,
    SAMPLE_COUNT_NAMES,
    STEP_RATE_NAMES,
    STEP_TIME_NAMES,
    TOKEN_COUNT_NAMES,
)
from monitoring.runs.compare.units import series_unit

# Rates and totals as trainers print them (the reader's names), and the portal's own series.
NAMES = (
    *STEP_RATE_NAMES,
    *STEP_TIME_NAMES,
    *TOKEN_COUNT_NAMES,
    *SAMPLE_COUNT_NAMES,
    PRINTED_MFU,
    COMPUTED_MFU,
    "tokens_per_sec",
    "tokens_per_sec_per_gpu",
    "train_tokens_per_s",
    "tps",
    "wps",
    "samples_per_sec",
    "samples_per_sec_per_gpu",
    "images_per_sec",
    "train_samples_per_second",
    "steps_per_sec/n1",
    "gpu/n1/0/utilization",
    "gpu/n1/0/power",
    "loss",
    "eval_loss",
    "val/acc",
    "lr",
    "grad_norm",
)
# What each kind is measured in: the units compare may give its series ("": none).
KIND_UNITS: dict[str, tuple[str, ...]] = {
    "token_rate": ("tokens/s", "tokens/s per GPU"),
    "sample_rate": ("samples/s", "samples/s per GPU"),
    "step_rate": ("steps/s",),
    "pace": ("steps/s",),
    "step_time": ("s/step",),
    "total": ("tokens", "samples"),
    "mfu": ("fraction of peak", "as the trainer prints it"),
    "gpu": ("%", "W"),
    "loss": ("",),
    "eval_loss": ("",),
    "eval": ("",),
    "learning_rate": ("",),
    "grad_norm": ("",),
}


@pytest.mark.parametrize("name", NAMES)
def test_the_unit_is_the_one_of_the_series_kind(name: str) -> None:
    assert series_unit(name) in KIND_UNITS[series_kind(name)]


def test_units_within_a_kind() -> None:
    assert series_unit("tokens_per_sec_per_gpu") == "tokens/s per GPU"
    assert series_unit("samples_per_sec") == "samples/s"
    assert series_unit("num_tokens") == "tokens" and series_unit("consumed_samples") == "samples"
    # A node's own pace is a step rate, on the job page's pace chart.
    assert (
        series_kind("steps_per_sec/n2") == "pace" and series_unit("steps_per_sec/n2") == "steps/s"
    )
    assert series_unit("gpu/n1/3/memory_used") == "MiB"
