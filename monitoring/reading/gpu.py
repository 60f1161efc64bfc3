"""Parsing of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` output."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from jobs.rundir import GPU_QUERY_FIELDS

# What nvidia-smi prints for a field the GPU cannot report, even with `nounits`.
_MISSING = frozenset({"[N/A]", "[Not Supported]", "N/A", "[Unknown Error]", ""})


class GpuParseError(ValueError):
    pass


@dataclass(frozen=True)
class GpuSample:
    time: datetime
    index: int
    uuid: str
    utilization: float | None
    memory_used_mib: float | None
    memory_total_mib: float | None
    temperature_c: float | None
    power_w: float | None


def _number(text: str) -> float | None:
    if text in _MISSING:
        return None
    value = float(text)
    return None if math.isnan(value) else value


def _timestamp(text: str) -> datetime:
    # nvidia-smi prints local time without a zone; the sampler runs with TZ=UTC.
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise GpuParseError(f"not an nvidia-smi timestamp: {text!r}")


def parse_gpu_line(line: str) -> GpuSample:
    """One line of the sampler's output, fields in GPU_QUERY_FIELDS order."""
    fields = [field.strip() for field in line.split(", ")]
    if len(fields) != len(GPU_QUERY_FIELDS):
        raise GpuParseError(f"expected {len(GPU_QUERY_FIELDS)} fields, got {len(fields)}: {line!r}")
    stamp, index, uuid, util, mem_used, mem_total, temp, power = fields
    try:
        return GpuSample(
            time=_timestamp(stamp),
            index=int(index),
            uuid=uuid,
            utilization=_number(util),
            memory_used_mib=_number(mem_used),
            memory_total_mib=_number(mem_total),
            temperature_c=_number(temp),
            power_w=_number(power),
        )
    except ValueError as exc:
        raise GpuParseError(f"{exc} in {line!r}") from exc


def parse_gpu_csv(text: str) -> tuple[list[GpuSample], list[str]]:
    """All complete lines parsed; lines that do not parse are returned, not raised."""
    samples: list[GpuSample] = []
    rejected: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            samples.append(parse_gpu_line(line))
        except GpuParseError:
            rejected.append(line)
    return samples, rejected
