import pytest

from monitoring.reading.parsers import MetricPoint, parse_metrics_jsonl
from monitoring.reading.throughput import (
    PEAK_BF16_FLOPS,
    Throughput,
    cumulative_rate,
    dense_transformer_flops_per_token,
    eta_seconds,
    job_tokens_per_step,
    mfu,
    other_loop_bar,
    rate_form,
    step_rate,
    throughput,
    token_rates,
)


def _ddp_train_jsonl(
    steps: range, *, t0: float = 1_777_000_000.0, dt: float = 0.5, batch: int = 64
) -> list[str]:
    # What examples/ddp_train.py appends per step: cumulative samples and wall time.
    return [
        f'{{"step": {s}, "loss": {1 / s}, "samples": {s * batch}, "time": {t0 + s * dt}}}'
        for s in steps
    ]


def _points(lines: list[str]) -> list[MetricPoint]:
    points, bad = parse_metrics_jsonl(lines)
    assert bad == 0
    return points


def test_mfu_of_a_7b_model_at_3000_tokens_per_gpu_on_8_h200() -> None:
    # 6 x 7e9 FLOPs/token x 24,000 tokens/s = 1.008e15 FLOP/s achieved,
    # over 8 x 989e12 = 7.912e15 FLOP/s peak.
    flops_per_token = dense_transformer_flops_per_token(7e9)
    assert flops_per_token == 4.2e10
    value = mfu(
        per_sec=3000 * 8,
        flops_per_unit=flops_per_token,
        gpus=8,
        peak_flops_per_gpu=PEAK_BF16_FLOPS["H200"],
    )
    assert value == pytest.approx(1.008e15 / 7.912e15)
    assert round(value, 3) == 0.127


def test_mfu_with_flops_per_sample_given_directly() -> None:
    # A vision model profiled at 12 GFLOPs per training sample, 2,000 samples/s on one A100.
    assert mfu(
        per_sec=2000, flops_per_unit=12e9, gpus=1, peak_flops_per_gpu=312e12
    ) == pytest.approx(24e12 / 312e12)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"per_sec": 1.0, "flops_per_unit": 1.0, "gpus": 0, "peak_flops_per_gpu": 1.0},
        {"per_sec": 1.0, "flops_per_unit": 1.0, "gpus": 1, "peak_flops_per_gpu": 0.0},
        {"per_sec": -1.0, "flops_per_unit": 1.0, "gpus": 1, "peak_flops_per_gpu": 1.0},
    ],
)
def test_mfu_refuses_nonsense(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        mfu(**kwargs)  # type: ignore[arg-type]


def test_cumulative_samples_give_the_rate_and_a_checkpoint_pause_does_not_drag_it() -> None:
    lines = _ddp_train_jsonl(range(1, 21))
    # Step 21 came 60 s late (a checkpoint); steps continue at 2 steps/s after it.
    lines += _ddp_train_jsonl(range(21, 31), t0=1_777_000_060.0)
    points = _points(lines)
    assert cumulative_rate(points, "samples") == pytest.approx(128.0)
    assert step_rate(points) == pytest.approx(2.0)


def test_a_resume_that_repeats_steps_starts_the_series_afresh() -> None:
    before = _ddp_train_jsonl(range(1, 51), dt=1.0)  # 64 samples/s
    after = _ddp_train_jsonl(range(41, 61), t0=1_777_000_100.0, dt=0.25)  # 256 samples/s
    points = _points(before + after)
    assert cumulative_rate(points, "samples") == pytest.approx(256.0)
    assert eta_seconds(points, final_step=100) == pytest.approx(40 * 0.25)


def test_throughput_prefers_reported_tokens_then_converts_samples() -> None:
    points = _points(_ddp_train_jsonl(range(1, 11)))
    assert throughput(points) == Throughput(128.0, "samples", "cumulative samples")
    assert throughput(points, tokens_per_sample=2048) == Throughput(
        128.0 * 2048, "tokens", "cumulative samples x 2048 tokens/sample"
    )
    reported = [
        MetricPoint("tokens_per_sec", s, v) for s, v in [(1, 900.0), (2, 1000.0), (3, 1100.0)]
    ]
    assert throughput(points + reported) == Throughput(1000.0, "tokens", "reported tokens_per_sec")


def test_throughput_from_stdout_samples_per_sec_and_from_step_timing() -> None:
    printed = [
        MetricPoint("samples_per_sec", s, v) for s, v in [(1, 812.4), (2, 20311.9), (3, 20100.0)]
    ]
    assert throughput(printed) == Throughput(20100.0, "samples", "reported samples_per_sec")
    timed = [MetricPoint("loss", s, 1.0, 100.0 + 0.2 * s) for s in range(1, 11)]
    assert throughput(timed) is None  # no batch size: steps alone are not samples
    found = throughput(timed, batch_size=256)
    assert found is not None and found.per_sec == pytest.approx(1280.0)
    assert found.source == "step time x batch size"


def test_eta_uses_the_recent_rate_and_ignores_a_pause() -> None:
    points = [MetricPoint("loss", s, 1.0, 10.0 * s) for s in range(1, 31)]
    points += [MetricPoint("loss", 31, 1.0, 10.0 * 30 + 3600)]  # a requeue: an hour's gap
    points += [MetricPoint("loss", s, 1.0, 3600 + 10.0 * s) for s in range(32, 41)]
    assert eta_seconds(points, final_step=100) == pytest.approx(60 * 10.0)
    assert eta_seconds(points, final_step=40) == 0.0
    assert eta_seconds(points[:1], final_step=100) is None
    assert eta_seconds([MetricPoint("loss", 5, 1.0)], final_step=100) is None


def test_an_evaluation_bar_is_another_loop_by_its_total_or_its_description() -> None:
    # Hugging Face's evaluation bar has no description: ` 100%|...| 4/4 [00:00<00:00, 270.15it/s]`
    # while the training bar is at `40/120`.
    assert other_loop_bar(description="", total=4, training_total=120)
    assert not other_loop_bar(description="", total=120, training_total=120)
    assert not other_loop_bar(description="", total=4, training_total=None)
    # Lightning's bars: `Epoch 1`, `Validation DataLoader 0`, `Sanity Checking DataLoader 0`.
    assert not other_loop_bar(description="Epoch 1", total=100, training_total=100)
    assert other_loop_bar(description="Validation DataLoader 0", total=100, training_total=100)
    assert other_loop_bar(description="Sanity Checking DataLoader 0", total=2, training_total=None)
    assert other_loop_bar(description="Evaluating", total=None, training_total=None)
    assert not other_loop_bar(description="latest", total=None, training_total=None)


def test_token_rates_prefer_the_step_rate_times_a_steps_tokens() -> None:
    metrics = [
        ("it_per_s", 30, 12.0),
        ("num_input_tokens_seen", 30, 3840.0),
        ("train_tokens_per_second", 30, 569.8),  # HF's average since the start
        ("it_per_s", 32, 12.72),
        ("train_steps_per_second", 40, 4.801),
        ("it_per_s", 40, 4.80),
    ]
    assert token_rates(metrics) == [
        (30, pytest.approx(12.0 * 128)),
        (32, pytest.approx(12.72 * 128)),
        (40, pytest.approx(4.80 * 128)),  # the bar's rate, before a summary's
    ]
    # No step rate: the printed whole-job rate; a per-GPU one is no whole-job rate.
    assert token_rates([("tokens_per_sec", 5, 9000.0), ("tokens_per_sec_per_gpu", 6, 1.0)]) == [
        (5, 9000.0)
    ]
    assert token_rates([("it_per_s", 5, 2.0)]) == []
    assert token_rates([("it_per_s", 5, 2.0)], tokens_per_step=4096) == [(5, 8192.0)]


def test_a_steps_tokens_from_the_jobs_parameters() -> None:
    params = {"block_size": 1024, "per_device_train_batch_size": 8}
    assert job_tokens_per_step(params, gpus=4) == 1024 * 8 * 4
    assert job_tokens_per_step({**params, "gradient_accumulation_steps": 2}, gpus=1) == 16384
    assert job_tokens_per_step({"block_size": 1024, "batch_size": 8}, gpus=1) is None
    assert (
        job_tokens_per_step({"max_seq_length": True, "per_device_train_batch_size": 8}, gpus=1)
        is None
    )


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("s_per_it", 4.0, ("it_per_s", 0.25)),
        ("ms_per_step", 205.0, ("step_per_s", 1000 / 205)),
        ("us_per_sample", 81.0, ("sample_per_s", 1e6 / 81)),
        ("it_per_s", 7.81, ("it_per_s", 7.81)),
        ("time_per_step", 3.0, ("time_per_step", 3.0)),
        ("s_per_it", 0.0, None),
    ],
)
def test_rate_form(name: str, value: float, expected: tuple[str, float] | None) -> None:
    found = rate_form(name, value)
    assert found == (None if expected is None else (expected[0], pytest.approx(expected[1])))
