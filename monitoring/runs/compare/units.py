"""What a compare chart's y axis is titled: the series' name and its unit, from the kind of
series it is (`monitoring.reading.kinds.series_kind`, the job page's chart rule)."""

from jobs.rundir import gpu_series
from monitoring.reading.kinds import (
    MFU,
    PACE,
    SAMPLE_RATE,
    STEP_RATE,
    STEP_TIME,
    TOKEN_RATE,
    TOTAL,
    series_kind,
)
from monitoring.reading.throughput import (
    COMPUTED_MFU,
    TOKEN_COUNT_NAMES,
    sample_rate_per_gpu,
    token_rate_per_gpu,
)

# The GPU sampler's series (jobs.rundir.gpu_series), by the metric part of their names.
GPU_UNITS = {"utilization": "%", "memory_used": "MiB", "temperature": "°C", "power": "W"}
# A node's pace (`steps_per_sec/<node>`) is a step rate too.
_KIND_UNITS = {STEP_RATE: "steps/s", PACE: "steps/s", STEP_TIME: "s/step"}


def series_unit(name: str) -> str:
    """The unit of a series' values; "" where they have none (a loss, a learning rate)."""
    kind = series_kind(name)
    if kind == TOKEN_RATE:
        return "tokens/s per GPU" if token_rate_per_gpu(name) else "tokens/s"
    if kind == SAMPLE_RATE:
        return "samples/s per GPU" if sample_rate_per_gpu(name) else "samples/s"
    if kind == TOTAL:
        return "tokens" if name in TOKEN_COUNT_NAMES else "samples"
    if kind == MFU:
        return "fraction of peak" if name == COMPUTED_MFU else "as the trainer prints it"
    gpu = gpu_series(name)
    if gpu is not None:
        return GPU_UNITS.get(gpu.metric, "")
    return _KIND_UNITS.get(kind, "")


def y_title(name: str) -> str:
    """`tokens_per_sec (tokens/s)`, or the bare name where the values have no unit."""
    unit = series_unit(name)
    return f"{name} ({unit})" if unit else name
