"""A line without a step adds values to the latest step only when it reads as a metrics line.

The failure corpus (tests/corpus/failures, verbatim logs, each with its source in
cases.toml) printed after a training line: NCCL's `NCCL INFO bootstrap.cc:176 -> 2`, the
kernel's Xid lines, snakemake's `resources: mem_mb=14000, ...`, a command echo, a
config echo. Before, 20 of the 68 logs drew such numbers as series of the last step.
The lines that must still attach are the framework corpus's (tests/corpus/metrics: eval
lines, Hugging Face dicts, DeepSpeed's timer lines, Composer's block); its runner checks them.
"""

import math
from pathlib import Path

import pytest

from monitoring.reading.reader import MetricReader, ReaderState

FAILURES = Path(__file__).resolve().parents[1] / "corpus" / "failures"
LOGS = sorted(FAILURES.glob("*.log"))
# Training lines of three shapes: a plain print, a logger record, DeepSpeed's log_dist.
TRAINING = {
    "step 7, loss=0.25": {"loss"},
    "2024-05-01 12:00:00,123 - INFO - __main__ - step 7 loss 0.25 lr 0.0001": {"loss", "lr"},
    "[2023-07-25 21:03:17,269] [INFO] [logging.py:96:log_dist] [Rank 0] step=7, skipped=0, "
    "lr=[0.0001], loss=0.25": {"loss", "lr", "skipped"},
}


def _names(lines: list[str]) -> set[str]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return {name for point in reader.finish() for name in point.values}


def _points(lines: list[str]) -> list[tuple[int, dict[str, float | int]]]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return [(point.step, point.values) for point in reader.finish()]


@pytest.mark.parametrize("training", list(TRAINING))
@pytest.mark.parametrize("log", LOGS, ids=lambda path: path.stem)
def test_a_failure_log_after_a_training_line_adds_only_training_names(
    log: Path, training: str
) -> None:
    """Every name read is the training line's or one the log's own training lines give."""
    lines = log.read_text(errors="replace").splitlines()
    assert _names([training, *lines]) <= TRAINING[training] | _names(lines)


def test_an_eval_line_after_a_step_still_attaches() -> None:
    """run_clm_no_trainer.py's eval line after the tqdm bar's step (corpus: accelerate)."""
    points = _points(
        [
            " 50%|█████     | 500/1000 [03:10<03:10,  2.62it/s]",
            "05/01/2024 12:00:00 - INFO - __main__ - epoch 0: perplexity: 23.44 eval_loss: 3.15",
        ]
    )
    assert points == [(500, {"it_per_s": 2.62, "perplexity": 23.44, "eval_loss": 3.15, "epoch": 0})]


@pytest.mark.parametrize(
    "line",
    [
        "Random Seed:  1536",  # gpu_thcudacheck_unknown_error.log: no name of a metric
        "    resources: mem_mb=14000, mem_mib=13352, tmpdir=/tmp, cores=1",  # a key=word setting
        "python train.py --gpu_ids 0 --batchsize 32",  # a command line
        "    dist.init_process_group(backend=backend, world_size=2)",  # code
        "node5:240:240 [6] NCCL INFO misc/socket.cc:570 -> 2",  # a file name
        "slurmstepd-gpu20-15: error: Detected 1 oom-kill event(s) in StepId=9411285.0.",
        "2024-05-01 12:00:01,000 - WARNING - __main__ - grad norm 1e9 at loss scale 65536",
    ],
)
def test_a_line_that_is_no_metrics_line_does_not_attach(line: str) -> None:
    assert _points(["step 7, loss=0.25", line]) == [(7, {"loss": 0.25})]


def test_a_line_whose_loss_is_nan_still_reads_as_a_metrics_line() -> None:
    """plain_loss_nan (vpetren/gradnorm_tf#17) after a step: its values go with the step."""
    [(step, values)] = _points(["step 200, loss=0.25", "epoch: 3451 loss: nan"])
    assert (step, values["epoch"], sorted(values)) == (200, 3451, ["epoch", "loss"])
    assert math.isnan(values["loss"])


def test_after_an_error_report_nothing_attaches_until_the_next_step() -> None:
    lines = [
        "step 7, loss=0.25",
        "Traceback (most recent call last):",
        "eval_loss: 3.5",
        "step 8, loss=0.5",
        "eval_loss: 3.25",
    ]
    assert _points(lines) == [(7, {"loss": 0.25}), (8, {"loss": 0.5, "eval_loss": 3.25})]


def test_indented_lines_under_a_heading_step_attach_whatever_their_names() -> None:
    """Composer's console logger: `[batch=100/4800]:` then `\\t Train <name>: <value>`."""
    lines = [
        "[batch=100/4800]:",
        "\t Train trainer/device_train_microbatch_size: 5",
        "\t Train memory/alloc_retries: 0",
        "Random Seed:  1536",
    ]
    assert _points(lines) == [
        (
            100,
            {"train_trainer/device_train_microbatch_size": 5, "train_memory/alloc_retries": 0},
        )
    ]


def test_the_attach_state_survives_between_polls() -> None:
    """An error report in one poll still keeps the next poll's step-less line off the step."""
    reader = MetricReader()
    for line in ["step 7, loss=0.25", "Traceback (most recent call last):"]:
        reader.feed(line)
    reader.finish()
    state = ReaderState.from_json(reader.state.to_json())
    later = MetricReader(state)
    later.feed("eval_loss: 3.5")
    assert later.finish() == []
