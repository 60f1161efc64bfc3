"""What a compare chart's y axis is titled: the series' name and its unit, by the same name
rules that `monitoring.reading.throughput` reads rates and totals with."""

from jobs.rundir import gpu_series
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

# The GPU sampler's series (jobs.rundir.gpu_series), by the metric part of their names.
GPU_UNITS = {"utilization": "%", "memory_used": "MiB", "temperature": "°C", "power": "W"}


def series_unit(name: str) -> str:
    """The unit of a series' values; "" where they have none (a loss, a learning rate)."""
    gpu = gpu_series(name)
    if gpu is not None:
        return GPU_UNITS.get(gpu.metric, "")
    for per_gpu, unit in (
        (token_rate_per_gpu(name), "tokens/s"),
        (sample_rate_per_gpu(name), "samples/s"),
    ):
        if per_gpu is not None:
            return f"{unit} per GPU" if per_gpu else unit
    if name in STEP_RATE_NAMES:
        return "steps/s"
    if name in STEP_TIME_NAMES:
        return "s/step"
    if name in TOKEN_COUNT_NAMES:
        return "tokens"
    if name in SAMPLE_COUNT_NAMES:
        return "samples"
    if name == COMPUTED_MFU:
        return "fraction of peak"
    if name == PRINTED_MFU:
        return "as the trainer prints it"
    return ""


def y_title(name: str) -> str:
    """`tokens_per_sec (tokens/s)`, or the bare name where the values have no unit."""
    unit = series_unit(name)
    return f"{name} ({unit})" if unit else name
