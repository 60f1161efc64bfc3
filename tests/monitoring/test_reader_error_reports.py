"""An error report is no training output: its numbers are not metrics of the last step.

The logs are the failure corpus (tests/corpus/failures, verbatim, each with its source in
cases.toml): tracebacks, torchrun's ChildFailedError table, NCCL watchdog lines, srun's and
slurmstepd's messages. Before, a job's page drew `exitcode`, `line`, `received_by_pid`,
`seq_num` and `timeout` as series after a killed rank.
"""

from pathlib import Path

import pytest

from monitoring.reading.reader import MetricReader

FAILURES = Path(__file__).resolve().parents[1] / "corpus" / "failures"
LOGS = sorted(FAILURES.glob("*.log"))


def _names(lines: list[str]) -> set[str]:
    reader = MetricReader()
    for line in lines:
        reader.feed(line)
    return {name for point in reader.finish() for name in point.values}


@pytest.mark.parametrize(
    "log", ["torchrun_child_failed_sigkill.log", "slurm_time_limit_step_terminated.log"]
)
def test_a_torchrun_or_srun_failure_after_training_adds_no_series(log: str) -> None:
    """The report, printed after a training line, leaves that line's values alone."""
    report = (FAILURES / log).read_text(errors="replace").splitlines()
    assert _names(["step 7, loss=0.25", *report]) == {"loss"}


def test_the_whole_corpus_reads_only_its_training_lines() -> None:
    names = set().union(*(_names(log.read_text(errors="replace").splitlines()) for log in LOGS))
    assert names == {
        "loss", "epoch", "it_per_s", "speed", "acc", "ms_per_step", "mean_squared_error",
        "consumed_samples", "reduced_train_loss", "samples_per_sec",
    }  # fmt: skip


def test_a_progress_bar_the_watchdog_ran_into_is_still_read() -> None:
    """nccl_watchdog_after_progress_bar.log, line 2: NeMo's bar, then `[E ProcessGroupNCCL...`."""
    line = (FAILURES / "nccl_watchdog_after_progress_bar.log").read_text().splitlines()[1]
    assert "[E ProcessGroupNCCL.cpp:458]" in line
    reader = MetricReader()
    reader.feed(line)
    (point,) = reader.finish()
    assert point.values["reduced_train_loss"] == 2.59
    assert not {"seq_num", "timeout", "op_type"} & set(point.values)
