from datetime import UTC, datetime

import pytest

from monitoring.reading.gpu import GpuParseError, parse_gpu_csv, parse_gpu_line

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
