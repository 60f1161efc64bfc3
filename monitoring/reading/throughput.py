"""Throughput, MFU and ETA of a training run, from its metric points. Pure arithmetic.

Rates are for the whole job (all GPUs together), which is what the example
trainer prints; a trainer that reports per-GPU rates needs multiplying by the
GPU count before mfu(). Pauses (checkpoints, requeues, a slow poll) must not
drag the numbers, so rates come from the median of the recent intervals rather
than first-to-last over a window.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from monitoring.reading.parsers import MetricPoint

# Rates by the reader's names (tests/corpus/README.md): `tokens/s` -> tokens_per_s,
# `SamplesPerSec` -> samples_per_sec, `tps`, fairseq's `wps` (words, i.e. tokens, per second).
# Two MFU series, never one: the trainer's own, shown as printed (its peak, its FLOP count,
# often a percentage), and the portal's, a fraction computed at ingest from a token rate.
PRINTED_MFU = "mfu"
COMPUTED_MFU = "mfu_computed"
_TOKEN_WORDS = ("tokens", "token", "tok", "toks", "words")
_SAMPLE_WORDS = (
    "samples", "sample", "examples", "sequences", "seqs", "seq", "images", "imgs", "img",
)  # fmt: skip
_PER_SECOND = ("per_sec", "per_second", "per_s")
_RATE_PREFIXES = ("train_", "running_avg_", "curr_", "current_", "avg_", "throughput_")
_TOKEN_SHORT = frozenset({"tps", "tok_per_sec", "wps", "tokens_per_sec_per_gpu"})
# What a step is called in a rate: tqdm's `it`, Keras's `step`, `batch`, fairseq's updates.
_STEP_WORDS = (
    "it", "step", "steps", "iter", "iters", "iteration", "iterations",
    "batch", "batches", "update", "updates",
)  # fmt: skip
_SECONDS = ("s", "sec", "second")
# Whole-job steps per second, tqdm's first (the runs table takes the first one a run has);
# fairseq prints `ups`, Hugging Face's summaries `train_steps_per_second`.
STEP_RATE_NAMES = (
    *(f"{word}_per_{second}" for word in _STEP_WORDS for second in _SECONDS),
    "steps_per_second",
    "train_steps_per_second",
    "ups",
)
# A time per step or sample, in the unit printed: tqdm's `s/it`, Keras's `205ms/step`, `1s/step`,
# `900us/step` and TF 2.0's `81us/sample`. The ingest stores it inverted (`rate_form`).
_SECONDS_OF = {"s": 1.0, "sec": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6}
_TIMED = (*_STEP_WORDS, "sample", "samples")
_STEP_RATE_RANK = {name: rank for rank, name in enumerate(STEP_RATE_NAMES)}
# Series stored before the ingest inverted step times (`rate_form`): charted as printed.
STEP_TIME_NAMES = ("s_per_it", "s_per_batch")
TOKEN_COUNT_NAMES = ("tokens", "num_tokens", "consumed_tokens", "num_input_tokens_seen")
SAMPLE_COUNT_NAMES = ("samples", "consumed_samples", "num_samples")

# Dense BF16 tensor-core peaks per GPU, FLOP/s (the datasheets' bigger numbers assume 2:4 sparsity).
PEAK_BF16_FLOPS = {"A100": 312e12, "H100": 989e12, "H200": 989e12}


@dataclass(frozen=True)
class Throughput:
    per_sec: float
    unit: Literal["tokens", "samples"]
    source: str  # how it was found, for a tooltip: "reported tokens_per_sec", ...


def _series(points: Sequence[MetricPoint], name: str) -> list[tuple[float, float]]:
    """(time, value) of one metric, in time order, after its last restart.

    A resumed run repeats steps and cumulative counters go back; only what
    follows the last step back-off describes the run as it is now.
    """
    timed = sorted(
        (p.time, p.step, p.value) for p in points if p.name == name and p.time is not None
    )
    start = 0
    for i in range(1, len(timed)):
        if timed[i][1] < timed[i - 1][1] or timed[i][2] < timed[i - 1][2]:
            start = i
    return [(t, v) for t, _, v in timed[start:]]


def _step_times(points: Sequence[MetricPoint]) -> list[tuple[float, int]]:
    """(time, step) of each step with a wall time, in time order, after the last step back-off."""
    timed = sorted((p.time, p.step) for p in points if p.time is not None)
    start = 0
    for i in range(1, len(timed)):
        if timed[i][1] < timed[i - 1][1]:
            start = i
    steps: list[tuple[float, int]] = []
    for t, step in timed[start:]:
        if not steps or step != steps[-1][1]:  # a step's metrics share one time, or nearly
            steps.append((t, step))
    return steps


def _median_slope(pairs: Sequence[tuple[float, float]], window: int) -> float | None:
    """Median of dy/dx over the last `window` intervals with dx > 0 and dy > 0."""
    recent = pairs[-window - 1 :]
    slopes = [
        (y1 - y0) / (x1 - x0)
        for (x0, y0), (x1, y1) in itertools.pairwise(recent)
        if x1 > x0 and y1 > y0
    ]
    return statistics.median(slopes) if slopes else None


def _rate(name: str, words: tuple[str, ...]) -> bool | None:
    """None when name is not a per-second rate of words; else whether it is per GPU."""
    per_gpu = name.endswith(("_per_gpu", "_per_device"))
    base = name.rsplit("_per_", 1)[0] if per_gpu else name
    for prefix in _RATE_PREFIXES:
        base = base.removeprefix(prefix)
    for word in words:
        if any(base == f"{word}_{per}" for per in _PER_SECOND):
            return per_gpu
    return None


# Cached: the poll classifies every series name of every running job, every second.
@functools.lru_cache(maxsize=8192)
def token_rate_per_gpu(name: str) -> bool | None:
    """True: a per-GPU token rate; False: the whole job's; None: no token rate."""
    if name in _TOKEN_SHORT:
        return name.endswith("_per_gpu")
    return _rate(name, _TOKEN_WORDS)


@functools.lru_cache(maxsize=8192)
def sample_rate_per_gpu(name: str) -> bool | None:
    """The same for sample rates: `samples_per_sec`, `train_samples_per_second`, `SamplesPerSec`."""
    return _rate(name, _SAMPLE_WORDS)


@functools.lru_cache(maxsize=8192)
def _step_time(name: str) -> tuple[str, float] | None:
    """(the rate's name, seconds per printed unit) of a time per step or sample."""
    unit, per, thing = name.partition("_per_")
    if not per or unit not in _SECONDS_OF or thing not in _TIMED:
        return None
    return f"{thing}_per_s", _SECONDS_OF[unit]


def rate_form(name: str, value: float) -> tuple[str, float] | None:
    """A point as the throughput chart keeps it: a time per step or sample becomes a rate.

    tqdm prints `s/it` below one step a second and `it/s` above, Keras `1s/step`, `205ms/step`
    or `900us/step` by size: inverted, each bar's rate is one series in one unit whatever
    it printed. A time that is not positive has no rate: None.
    """
    timed = _step_time(name)
    if timed is None:
        return name, value
    rate_name, seconds = timed
    return (rate_name, 1 / (value * seconds)) if value > 0 else None


# Words of a progress bar's description that name another loop than training
# (`Evaluating`, Lightning's `Validation DataLoader 0`, `Sanity Checking`, `Predicting`).
_OTHER_LOOPS = ("eval", "valid", "test", "predict", "sanity", "infer")


def other_loop_bar(*, description: str, total: int | None, training_total: int | None) -> bool:
    """Whether a progress bar counts another loop than training: its rate is no throughput
    and its count no step.

    Its description says so, or its total differs from the training bar's (Hugging Face's
    evaluation bar has no description: `4/4` drawn while the training bar is at `40/120`).
    """
    words = "".join(c if c.isalpha() else " " for c in description.lower()).split()
    if any(word.startswith(_OTHER_LOOPS) for word in words):
        return True
    return bool(total and training_total and total != training_total)


def _rate_names(points: Sequence[MetricPoint], classify: Callable[[str], bool | None]) -> list[str]:
    """Names in points that classify as whole-job rates first, then per-GPU ones."""
    names = dict.fromkeys(p.name for p in points)
    found = [(per_gpu, n) for n in names if (per_gpu := classify(n)) is not None]
    return [n for _, n in sorted(found, key=lambda item: item[0])]


def reported_rate(
    points: Sequence[MetricPoint], names: Sequence[str], *, window: int = 5
) -> tuple[str, float] | None:
    """(name, median of its last `window` values) for the first of names the trainer reports."""
    for name in names:
        values = [p.value for p in points if p.name == name and p.value > 0]
        if values:
            return name, statistics.median(values[-window:])
    return None


def cumulative_rate(points: Sequence[MetricPoint], name: str, *, window: int = 20) -> float | None:
    """Units per second from a cumulative counter (`samples`, `tokens`) and its wall times."""
    return _median_slope(_series(points, name), window)


def step_rate(points: Sequence[MetricPoint], *, window: int = 20) -> float | None:
    """Steps per second over the recent steps that have wall times."""
    seconds_per_step = _median_slope([(float(s), t) for t, s in _step_times(points)], window)
    return 1 / seconds_per_step if seconds_per_step else None


def throughput(
    points: Sequence[MetricPoint],
    *,
    batch_size: int | None = None,
    tokens_per_sample: float | None = None,
    window: int = 20,
) -> Throughput | None:
    """The job's current throughput, tokens/s when it can be had (MFU needs tokens).

    In order: a reported token rate, the slope of a cumulative token count, then
    samples: reported, cumulative, or steps/s x `batch_size` (the global batch,
    in samples); samples become tokens when `tokens_per_sample` is given.
    """
    found = reported_rate(points, _rate_names(points, token_rate_per_gpu))
    if found:
        return Throughput(found[1], "tokens", f"reported {found[0]}")
    for name in TOKEN_COUNT_NAMES:
        rate = cumulative_rate(points, name, window=window)
        if rate:
            return Throughput(rate, "tokens", f"cumulative {name}")
    samples: Throughput | None = None
    found = reported_rate(points, _rate_names(points, sample_rate_per_gpu))
    if found:
        samples = Throughput(found[1], "samples", f"reported {found[0]}")
    for name in SAMPLE_COUNT_NAMES:
        rate = cumulative_rate(points, name, window=window)
        if samples is None and rate:
            samples = Throughput(rate, "samples", f"cumulative {name}")
    if samples is None and batch_size:
        printed = reported_rate(points, STEP_RATE_NAMES) or _inverse(
            reported_rate(points, STEP_TIME_NAMES)
        )
        if printed:
            samples = Throughput(printed[1] * batch_size, "samples", f"{printed[0]} x batch size")
    if samples is None and batch_size:
        steps = step_rate(points, window=window)
        if steps:
            samples = Throughput(steps * batch_size, "samples", "step time x batch size")
    if samples is not None and tokens_per_sample:
        source = f"{samples.source} x {tokens_per_sample:g} tokens/sample"
        return Throughput(samples.per_sec * tokens_per_sample, "tokens", source)
    return samples


def _inverse(found: tuple[str, float] | None) -> tuple[str, float] | None:
    return (found[0], 1 / found[1]) if found and found[1] > 0 else None


# A job's parameters that give its sequence length (Hugging Face's example scripts' flags).
SEQUENCE_LENGTH_KEYS = (
    "max_seq_length", "max_seq_len", "seq_length", "seq_len", "sequence_length", "block_size",
)  # fmt: skip


def _positive(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if value > 0 else None


def job_tokens_per_step(params: Mapping[str, object], *, gpus: int) -> float | None:
    """Tokens in one optimizer step of a Hugging Face Trainer run, from the job's parameters.

    Sequence length x `per_device_train_batch_size` x `gradient_accumulation_steps` x the
    job's GPUs, the Trainer's own meaning of its flags (one data-parallel rank per GPU).
    None unless both the sequence length and the per-device batch are given.
    """
    seq = next((v for key in SEQUENCE_LENGTH_KEYS if (v := _positive(params.get(key)))), None)
    batch = _positive(params.get("per_device_train_batch_size"))
    if seq is None or batch is None or gpus < 1:
        return None
    accumulation = _positive(params.get("gradient_accumulation_steps")) or 1.0
    return seq * batch * accumulation * gpus


def token_rates(
    metrics: Iterable[tuple[str, int, float]], *, tokens_per_step: float | None = None
) -> list[tuple[int, float]]:
    """(step, the whole job's tokens per second) wherever the points give it.

    The step rate times a step's tokens, where both are known: the tokens from a cumulative
    count over its step (Hugging Face's `num_input_tokens_seen`, the newest at or before
    the step), else `tokens_per_step` (`job_tokens_per_step`). Else a whole-job token rate
    the trainer prints; Hugging Face's `train_tokens_per_second` is its average since the
    start, pauses included, so the step rate is preferred where there is one.
    """
    step_rates: dict[int, float] = {}
    ranks: dict[int, int] = {}
    reported: dict[int, float] = {}
    per_step_at: dict[int, float] = {}
    for name, step, value in metrics:
        if not value > 0:
            continue
        rank = _STEP_RATE_RANK.get(name)
        if rank is not None:  # two at one step (a bar's and a summary's): the first name's
            if rank <= ranks.setdefault(step, rank):
                ranks[step], step_rates[step] = rank, value
        elif token_rate_per_gpu(name) is False:  # a per-GPU rate would need x GPUs
            reported[step] = value
        elif name in TOKEN_COUNT_NAMES and step > 0:
            per_step_at[step] = value / step
    rates: list[tuple[int, float]] = []
    per_step = tokens_per_step
    for step in sorted(step_rates.keys() | reported.keys() | per_step_at.keys()):
        per_step = per_step_at.get(step, per_step)
        if step in step_rates and per_step:
            rates.append((step, step_rates[step] * per_step))
        elif step in reported:
            rates.append((step, reported[step]))
    return rates


def dense_transformer_flops_per_token(params: float) -> float:
    """Training FLOPs per token of a dense transformer: the 6N rule.

    Forward is ~2N multiply-adds per token, backward twice that. It leaves out
    attention's sequence-length term (12 x layers x d_model x seq per token),
    small below ~8k context, and activation recomputation, which MFU by
    definition does not credit (that would be HFU). For mixture-of-experts use
    the active parameters; for anything else pass the profiler's FLOPs per token
    or per sample to mfu() directly.
    """
    if params <= 0:
        raise ValueError("params must be positive")
    return 6 * params


def mfu(*, per_sec: float, flops_per_unit: float, gpus: int, peak_flops_per_gpu: float) -> float:
    """Model FLOPs utilisation: achieved FLOP/s over the GPUs' combined peak.

    per_sec is the whole job's tokens (or samples) per second and flops_per_unit
    the training FLOPs of one of them; the peak is the dense figure for the
    precision used (989e12 for BF16 on H100/H200).
    """
    if gpus < 1 or peak_flops_per_gpu <= 0:
        raise ValueError("gpus must be >= 1 and peak_flops_per_gpu positive")
    if per_sec < 0 or flops_per_unit < 0:
        raise ValueError("per_sec and flops_per_unit must not be negative")
    return per_sec * flops_per_unit / (gpus * peak_flops_per_gpu)


def eta_seconds(
    points: Sequence[MetricPoint], *, final_step: int, window: int = 20
) -> float | None:
    """Seconds until final_step at the recent step rate; None before two timed steps.

    The rate is the median seconds-per-step of the last `window` intervals, so
    a checkpoint or requeue pause among them does not move the estimate.
    """
    timed = _step_times(points)
    if not timed:
        return None
    remaining = final_step - timed[-1][1]
    if remaining <= 0:
        return 0.0
    steps = step_rate(points, window=window)
    return remaining / steps if steps else None
