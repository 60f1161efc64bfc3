from datetime import UTC, datetime

import pytest

from monitoring.reading.gpu import (
    EccRise,
    GpuParseError,
    ecc_rises,
    faults_tally,
    parse_gpu_csv,
    parse_gpu_line,
)

# Shape of real output from an 8-GPU H100/H200 node:
# nvidia-smi --query-gpu=timestamp,index,uuid,utilization.gpu,memory.used,memory.total,\
#   temperature.gpu,power.draw --format=csv,noheader,nounits
REAL = """\
2026/12/01 10:00:00.123, 0, GPU-5f1c2b7e-8d3a-4c1e-9f6b-0a1b2c3d4e5f, 87, 40321, 143771, 51, 412.35
2026/12/01 10:00:00.124, 1, GPU-6a2d3c8f-9e4b-5d2f-a07c-1b2c3d4e5f60, 0, 4, 143771, 33, 72.10
2026/12/01 10:00:00.125, 2, GPU-7b3e4d90-af5c-6e30-b18d-2c3d4e5f6071, [N/A], 0, 143771, 34, [N/A]
2026/12/01 10:00:00.126, 3, GPU-8c4f5ea1-b06d-7f41-c29e-3d4e5f6071, 100, 143000, 143771, 80, [Not Supported]
"""


def test_real_format_lines_parse() -> None:
    samples, rejected = parse_gpu_csv(REAL)
    assert rejected == []
    first = samples[0]
    assert first.time == datetime(2026, 12, 1, 10, 0, 0, 123000, tzinfo=UTC)
    assert (first.index, first.utilization, first.memory_used_mib, first.power_w) == (
        0,
        87.0,
        40321.0,
        412.35,
    )
    assert first.uuid.startswith("GPU-5f1c")


def test_not_available_fields_become_none() -> None:
    samples, _ = parse_gpu_csv(REAL)
    assert samples[2].utilization is None and samples[2].power_w is None
    assert samples[3].power_w is None and samples[3].utilization == 100.0


def test_partial_and_garbage_lines_are_rejected_not_raised() -> None:
    text = REAL + "2026/12/01 10:00:01.000, 0, GPU-5f1c, 8\nNVIDIA-SMI has failed\n"
    samples, rejected = parse_gpu_csv(text)
    assert len(samples) == 4
    assert rejected == ["2026/12/01 10:00:01.000, 0, GPU-5f1c, 8", "NVIDIA-SMI has failed"]


def test_units_are_not_silently_accepted() -> None:
    with pytest.raises(GpuParseError):
        parse_gpu_line(
            "2026/12/01 10:00:00.123, 0, GPU-x, 87 %, 40321 MiB, 143771 MiB, 51, 412.35 W"
        )


# The sampler's query since GPU faults are asked for (jobs.rundir.GPU_QUERY_FIELDS), in the
# real tool's layout: counts as plain integers, retired_pages.pending as Yes or No, and
# "[N/A]" / "[Not Supported]" where a GPU cannot tell (no ECC; Ampere and later remap rows
# instead of retiring pages).
WITH_FAULTS = """\
2026/12/01 10:00:00.123, 0, GPU-5f1c2b7e-8d3a-4c1e-9f6b-0a1b2c3d4e5f, 87, 40321, 143771, 51, 412.35, 0, 0, [N/A]
2026/12/01 10:00:00.124, 1, GPU-6a2d3c8f-9e4b-5d2f-a07c-1b2c3d4e5f60, 0, 4, 143771, 33, 72.10, 3, 117, No
2026/12/01 10:00:00.125, 2, GPU-7b3e4d90-af5c-6e30-b18d-2c3d4e5f6071, 5, 0, 24576, 34, 30.00, [N/A], [N/A], [N/A]
2026/12/01 10:00:00.126, 3, GPU-8c4f5ea1-b06d-7f41-c29e-3d4e5f6071, 100, 143000, 143771, 80, 690.00, 12, 4, Yes
2026/12/01 10:00:00.127, 4, GPU-9d5060b2-c17e-8052-d3af-4e5f60718293, 1, 2, 16384, 40, 25.00, [Not Supported], [Not Supported], [Not Supported]
"""


def test_fault_fields_parse_as_counts_and_yes_no() -> None:
    samples, rejected = parse_gpu_csv(WITH_FAULTS)
    assert rejected == []
    faults = [(s.ecc_uncorrected, s.ecc_corrected, s.retired_pages_pending) for s in samples]
    assert faults == [
        (0, 0, None),
        (3, 117, False),
        (None, None, None),
        (12, 4, True),
        (None, None, None),
    ]
    assert samples[3].power_w == 690.0  # the first columns are read as before


def test_a_line_from_a_sampler_started_before_the_fault_fields_still_parses() -> None:
    sample = parse_gpu_line(REAL.splitlines()[0])
    assert sample.utilization == 87.0
    assert (sample.ecc_uncorrected, sample.ecc_corrected, sample.retired_pages_pending) == (
        None,
        None,
        None,
    )


@pytest.mark.parametrize(
    "faults",
    ["-1, 0, No", "1.5, 0, No", "0, 0, Maybe", "0, 0", "0, 0, No, 7"],
)
def test_fault_fields_that_are_no_counts_reject_the_line(faults: str) -> None:
    line = "2026/12/01 10:00:00.123, 0, GPU-x, 87, 40321, 143771, 51, 412.35, " + faults
    with pytest.raises(GpuParseError):
        parse_gpu_line(line)


def test_a_rise_is_the_highest_count_above_the_first_per_gpu() -> None:
    state: dict[str, object] = {}
    counts = {0: [2, 2, 2], 1: [0, 1, 3, 3], 2: [5, 4]}  # GPU 2: reset below its first
    for index, values in counts.items():
        for value in values:
            line = f"2026/12/01 10:00:00.123, {index}, GPU-x, 87, 1, 2, 51, 412.35, {value}, 0, No"
            faults_tally(state, parse_gpu_line(line))
    faults_tally(state, parse_gpu_line("2026/12/01 10:00:01.0, 0, GPU-x, 1, 1, 2, 5, 9, 2, 0, Yes"))
    assert ecc_rises(state) == [EccRise(index=1, first=0, high=3, pending=False)]
    assert state["faults"]["0"]["pending"] is True  # type: ignore[index]
    assert ecc_rises({}) == [] and ecc_rises(None) == []
