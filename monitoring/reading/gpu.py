"""Parsing of `nvidia-smi --query-gpu=... --format=csv,noheader,nounits` output."""

import math
from dataclasses import dataclass
from datetime import UTC, datetime

from jobs.rundir import GPU_QUERY_FIELDS, GPU_QUERY_FIELDS_BEFORE_FAULTS

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
    # GPU faults, None where the GPU cannot tell (no ECC) or the line predates the fields.
    ecc_uncorrected: int | None = None  # since the driver loaded ("volatile")
    ecc_corrected: int | None = None
    retired_pages_pending: bool | None = None


def _number(text: str) -> float | None:
    if text in _MISSING:
        return None
    value = float(text)
    return None if math.isnan(value) else value


def _count(text: str) -> int | None:
    if text in _MISSING:
        return None
    value = int(text)
    if value < 0:
        raise ValueError(f"a negative count: {text!r}")
    return value


def _yes_no(text: str) -> bool | None:
    if text in _MISSING:
        return None
    if text not in ("Yes", "No"):
        raise ValueError(f"neither Yes nor No: {text!r}")
    return text == "Yes"


def _timestamp(text: str) -> datetime:
    # nvidia-smi prints local time without a zone; the sampler runs with TZ=UTC.
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S"):
        try:
            return datetime.strptime(text, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    raise GpuParseError(f"not an nvidia-smi timestamp: {text!r}")


def parse_gpu_line(line: str) -> GpuSample:
    """One line of the sampler's output, fields in GPU_QUERY_FIELDS order (or the first
    columns only, from a sampler started before the fault fields were asked for)."""
    fields = [field.strip() for field in line.split(", ")]
    if len(fields) not in (len(GPU_QUERY_FIELDS), GPU_QUERY_FIELDS_BEFORE_FAULTS):
        raise GpuParseError(f"expected {len(GPU_QUERY_FIELDS)} fields, got {len(fields)}: {line!r}")
    stamp, index, uuid, util, mem_used, mem_total, temp, power = fields[:8]
    uncorrected, corrected, pending = fields[8:] or ("", "", "")
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
            ecc_uncorrected=_count(uncorrected),
            ecc_corrected=_count(corrected),
            retired_pages_pending=_yes_no(pending),
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


# --- GPU faults over an attempt, kept between polls on the file's row ------------------------

FAULTS_KEY = "faults"  # in the GPU file's parser state: GPU index -> its tally


def faults_tally(state: dict[str, object], sample: GpuSample) -> None:
    """Fold one sample's fault fields into the file's tally: per GPU, the first and highest
    uncorrected count seen, and whether pages waited to be retired."""
    if sample.ecc_uncorrected is None and not sample.retired_pages_pending:
        return
    tallies = state.setdefault(FAULTS_KEY, {})
    if not isinstance(tallies, dict):
        return
    tally = tallies.setdefault(str(sample.index), {})
    count = sample.ecc_uncorrected
    if count is not None:
        tally.setdefault("first", count)
        tally["high"] = max(count, tally.get("high", count))
    if sample.retired_pages_pending:
        tally["pending"] = True


@dataclass(frozen=True)
class EccRise:
    index: int
    first: int
    high: int
    pending: bool  # pages waited to be retired


def ecc_rises(state: object) -> list[EccRise]:
    """The GPUs whose uncorrected count rose while the file was written, by index."""
    tallies = state.get(FAULTS_KEY) if isinstance(state, dict) else None
    rises = []
    for index, tally in (tallies or {}).items():
        first, high = tally.get("first"), tally.get("high")
        if isinstance(first, int) and isinstance(high, int) and high > first:
            rises.append(EccRise(int(index), first, high, bool(tally.get("pending"))))
    return sorted(rises, key=lambda r: r.index)
