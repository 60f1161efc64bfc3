"""Numbers as the pages print them (portal_lib.units), on the values the issue saw: a runs
table mixing 1.28e+05 tokens/s, 4982 samples/s and 3.3 it/s, and the job page's GPU figures."""

import math

import pytest

from monitoring.templatetags.runs import run_cell
from portal_lib.units import number_text, quantity, rate_unit


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1.28e5, "tokens/s", "128k tokens/s"),
        (4982.0, "samples/s", "4.98k samples/s"),
        (3.3, "steps/s", "3.3 steps/s"),
        (61_000 / 1024, "GiB", "59.6 GiB"),
        (71.0, "°C", "71 °C"),
        (612.4, "W", "612 W"),
        (41.23, "%", "41.2 %"),
        (0.075, "", "0.075"),
        (3e-4, "", "0.0003"),
        (2.5e-5, "", "2.5e-05"),
        (1.28e17, "", "1.28e+17"),  # a diverged loss: never 1.2x10<sup>17</sup>
        (1_234_567.0, "samples", "1.23M samples"),
        (2.2e9, "tokens", "2.2G tokens"),
        (0.0, "W", "0 W"),
        (-4200.0, "", "-4.2k"),
        (None, "tokens/s", "\u2013"),
    ],
)
def test_quantity_reads_like_a_person_writes_it(value, unit, text) -> None:
    assert quantity(value, unit) == text


def test_rounding_up_to_the_next_prefix_never_prints_1000k() -> None:
    assert number_text(999.4) == "999"
    assert number_text(999.96) == "1k"
    assert number_text(999_960.0) == "1M"
    assert number_text(12_345.0) == "12.3k"


def test_non_finite_values_are_named() -> None:
    assert number_text(math.nan) == "NaN"
    assert number_text(math.inf) == "∞"
    assert number_text(-math.inf) == "-∞"


def test_a_recorded_rate_kind_has_its_unit() -> None:
    assert [rate_unit(k) for k in ("tokens", "samples", "steps")] == [
        "tokens/s",
        "samples/s",
        "steps/s",
    ]


def test_runs_table_cells_carry_their_unit() -> None:
    assert run_cell({"key": "throughput", "value": 1.28e5, "unit": "tokens/s"}) == "128k tokens/s"
    assert run_cell({"key": "throughput", "value": 3.3, "unit": "steps/s"}) == "3.3 steps/s"
    assert run_cell({"key": "mfu", "value": 0.4123, "unit": ""}) == "41.2 %"
    assert run_cell({"key": "mfu", "value": 38.5, "unit": ""}) == "38.5 %"  # printed in %
    assert run_cell({"key": "duration", "value": 3900.0, "unit": ""}) == "1:05"
    assert run_cell({"key": "loss_last", "value": None, "unit": ""}) == ""
