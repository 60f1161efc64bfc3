"""A printed MFU and the portal's computed one are two series, never one.

nanoGPT prints `mfu 12.34%` (a percentage of its own A100 peak); the portal computes a
fraction from a token rate, 6 x params and the cluster's peak. Before, both went into
`mfu`: a poll with a token rate and no printed MFU wrote fractions between percentages,
and the efficiency card's mean (a fraction, shown as %) took a printed 12.34 as 1,234 %.
"""

from pathlib import Path

import pytest

from monitoring.ingest.parse import NewBytes, attempt_parse
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.kinds import series_kind
from monitoring.reading.throughput import COMPUTED_MFU, PRINTED_MFU
from tests import factories

# torchtitan's metrics line (torchtitan/train.py) and nanoGPT's (train.py), as in tests/corpus.
TITAN = b"step: 10  loss:  8.1  memory: 9.46GiB(64.99%)  tps: 5,856  tflops: 340.6  mfu: 34.44%\n"
TITAN_NO_MFU = b"step: 20  loss:  7.9  memory: 9.46GiB(64.99%)  tps: 5,900\n"
NANOGPT = b"iter 100: loss 2.3456, time 123.45ms, mfu 12.34%\n"


def _poll(
    attempt, log_file: LogFile, note: AttemptIngest, data: bytes
) -> list[tuple[str, float, float]]:
    parsed = attempt_parse(
        attempt,
        {"stdout.log": log_file},
        {"stdout.log": NewBytes(log_file.parsed_to, data)},
        final=False,
        note=note,
    )
    return [(name, step, value) for _, name, step, value in parsed.points]


def _job(project, owner):
    cluster = factories.cluster()
    cluster.gpu_peak_bf16_tflops = 989.0
    cluster.save()
    job, attempt = factories.job(project, owner, cluster, nodes=1, gpus_per_node=8)
    job.model_params = 124_000_000
    job.save()
    log_file = LogFile.objects.create(attempt=attempt, name="stdout.log")
    return attempt, log_file, AttemptIngest.objects.create(attempt=attempt)


def test_a_token_rate_without_a_printed_mfu_gives_the_computed_series(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    points = _poll(attempt, log_file, note, TITAN_NO_MFU)
    names = {name for name, _, _ in points}
    assert COMPUTED_MFU in names and PRINTED_MFU not in names
    (computed,) = [value for name, _, value in points if name == COMPUTED_MFU]
    assert 0 < computed < 1  # a fraction: 5,900 tokens/s x 6 x 124M / (8 x 989 TFLOP/s)


def test_a_printed_mfu_is_shown_as_printed_and_wins_for_the_attempt(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    first = _poll(attempt, log_file, note, TITAN)
    assert ("mfu", 10.0, 34.44) in first
    assert all(name != COMPUTED_MFU for name, _, _ in first)
    # A later poll with a token rate and no MFU printed: nothing computed to mix in.
    later = _poll(attempt, log_file, note, TITAN_NO_MFU)
    assert {name for name, _, _ in later} >= {"tps", "loss"}
    assert all(name not in (COMPUTED_MFU, PRINTED_MFU) for name, _, _ in later)


def test_a_job_cannot_print_into_the_computed_series(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    points = _poll(attempt, log_file, note, b"iter 5: loss 2.5, mfu_computed 0.99\n")
    assert all(name != COMPUTED_MFU for name, _, _ in points)
    assert ("loss", 5.0, 2.5) in points


def test_nanogpt_printed_percentage_stays_as_printed(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    assert ("mfu", 100.0, 12.34) in _poll(attempt, log_file, note, NANOGPT)


def test_both_mfu_series_go_on_the_mfu_chart() -> None:
    assert series_kind(PRINTED_MFU) == series_kind(COMPUTED_MFU) == "mfu"


# A tiny Hugging Face Trainer run with include_num_input_tokens_seen=True (fixtures/throughput/).
HF_LOG = (
    Path(__file__).parent / "fixtures" / "throughput" / "hf_trainer_tokens_seen.log"
).read_bytes()
HF_TOKENS_PER_STEP = 4 * 32  # per_device_train_batch_size x sequence length, one process


def test_hugging_face_tokens_seen_give_mfu_at_the_training_step_rate(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    points = _poll(attempt, log_file, note, HF_LOG)
    rates = dict((step, value) for name, step, value in points if name == "it_per_s")
    computed = dict((step, value) for name, step, value in points if name == COMPUTED_MFU)
    assert computed, "no MFU from num_input_tokens_seen"
    job = attempt.job
    peak = job.total_gpus * 989e12
    flops = 6 * job.model_params
    # Each MFU point is the training bar's steps/s there times 128 tokens a step: never
    # train_tokens_per_second's average since the start (569.8 at step 30, 12.00 it/s there).
    for step, value in computed.items():
        assert value == pytest.approx(rates[step] * HF_TOKENS_PER_STEP * flops / peak)
    assert computed[30.0] == pytest.approx(12.00 * HF_TOKENS_PER_STEP * flops / peak)


def test_mfu_from_the_jobs_sequence_length_and_batch(project, owner) -> None:
    attempt, log_file, note = _job(project, owner)
    job = attempt.job
    job.params = {"block_size": 1024, "per_device_train_batch_size": 8}
    job.save()
    line = b" 30%|\xe2\x96\x88\xe2\x96\x88\xe2\x96\x88       | 30/100 [00:12<00:28,  2.50it/s]\n"
    (value,) = [v for name, _, v in _poll(attempt, log_file, note, line) if name == COMPUTED_MFU]
    tokens_per_s = 2.50 * 1024 * 8 * job.total_gpus
    assert value == pytest.approx(tokens_per_s * 6 * job.model_params / (8 * 989e12))
