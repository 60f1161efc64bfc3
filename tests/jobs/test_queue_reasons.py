"""Slurm's pending reasons in plain words, read from squeue output as Slurm prints it.

The captured sandbox output (tests/clusters/fixtures/slurm, parsed as the poll parses it)
gives Resources, Priority, BeginTime, JobHeldUser and JobArrayTaskLimit; the lines of
squeue's default format below are verbatim from public reports (reframe-hpc/reframe
issue 2411; a cluster's user guide with launch failures), and the limit codes are the
ones Slurm's "Job Reason Codes" page lists, as squeue prints them in NODELIST(REASON).
"""

import pytest

from clusters.slurm import parse_squeue
from jobs.queue.reasons import explain_reason
from tests.clusters.slurm_output import SQUEUE_FIELDS_2026_12_01, by_id, fixture

# squeue's default output, verbatim (the reason is the last column, in parentheses).
REFRAME_2411 = """\
             JOBID            PARTITION                 NAME     USER    STATE     TIME TIME_LIMI  NODES   PRIORITY           START_TIME                                   NODELIST(REASON)
           8724936         gpu_titanrtx                sleep  <myuser> PENDING     0:00      5:00      1     689130  2022-02-01T18:32:40          (ReqNodeNotAvail, UnavailableNodes:r34n5)
           8724937         gpu_titanrtx                sleep  <myuser> PENDING     0:00      5:00      1     689129  2022-02-01T18:32:40   (ReqNodeNotAvail, May be reserved for other job)
"""
LAUNCH_FAILED = """\
    JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)
    137849     batch   job1  abc PD       0:00      4 (launch failed requeued held)
"""


def _reason_column(text: str) -> list[str]:
    """The NODELIST(REASON) column of pending rows: from the last '(' of each line."""
    lines = text.splitlines()[1:]
    return [line[line.rindex("(") :].strip() for line in lines]


def test_the_reasons_captured_on_the_sandbox_read_in_plain_words() -> None:
    mixed = by_id(parse_squeue(fixture("squeue_mixed.txt"), fields=SQUEUE_FIELDS_2026_12_01))
    resources = explain_reason(mixed["17"].reason or "")
    assert resources.code == "Resources"
    assert resources.words.startswith("Waiting for resources: the GPUs")
    assert "fewer GPUs" in resources.advice
    priority = explain_reason(mixed["18"].reason or "")
    assert (priority.code, priority.words) == (
        "Priority",
        "Waiting its turn: jobs with a higher priority are ahead of it in this partition.",
    )
    assert "shorter time limit" in priority.advice
    held = explain_reason(mixed["14"].reason or "")
    assert held.words.startswith("Held by its user") and "scontrol release" in held.advice
    assert explain_reason(mixed["13"].reason or "").words.startswith("Its earliest start time")
    arrays = by_id(parse_squeue(fixture("squeue_arrays.txt"), fields=SQUEUE_FIELDS_2026_12_01))
    limit = explain_reason(arrays["20_[2-3%2]"].reason or "")
    assert limit.code == "JobArrayTaskLimit" and "tasks at once" in limit.words


def test_a_reason_with_slurms_description_keeps_the_nodes_it_names() -> None:
    named, reserved = (explain_reason(r) for r in _reason_column(REFRAME_2411))
    assert named.code == "ReqNodeNotAvail, UnavailableNodes:r34n5"
    assert named.words == (
        "A node it needs is not available: in use, reserved, down or drained. "
        "Unavailable nodes: r34n5."
    )
    assert reserved.words.endswith("(May be reserved for other job)")
    (failed,) = (explain_reason(r) for r in _reason_column(LAUNCH_FAILED))
    assert failed.code == "launch failed requeued held"
    assert failed.words.startswith("Slurm could not launch it on its node")
    assert "scontrol release" in failed.advice


@pytest.mark.parametrize(
    ("code", "words", "advice"),
    [
        (
            "AssocGrpGRES",
            "The project's Slurm account has reached its limit on GPUs (or other generic "
            "resources).",
            "running jobs under the same limit end",
        ),
        ("AssocGrpCpuLimit", "The project's Slurm account has reached its limit on CPUs.", "end"),
        (
            "AssocMaxJobsLimit",
            "Its user has reached the project's Slurm account's per-user limit on running jobs.",
            "end",
        ),
        (
            "QOSMaxGRESPerUser",
            "Its user has reached the QOS's per-user limit on GPUs (or other generic resources).",
            "end",
        ),
        ("QOSGrpGRES", "The QOS has reached its limit on GPUs (or other generic resources).", ""),
        (
            "AssocGrpGRESRunMinutes",
            "The project's Slurm account has reached its limit on GPU-minutes booked by running "
            "jobs.",
            "",
        ),
        (
            "QOSMaxWallDurationPerJobLimit",
            "It asks for more wall time for one job than the QOS allows.",
            "cancel it and submit it again with less",
        ),
        ("QOSMaxCpuPerNode", "It asks for more CPUs per node than the QOS allows.", "with less"),
        ("JobHeldAdmin", "Held by a cluster administrator.", "only they can release it"),
        ("PartitionTimeLimit", "Its time limit is longer than its partition allows.", "shorter"),
        ("PartitionNodeLimit", "It asks for more (or fewer) nodes than its partition", "node"),
        ("Dependency", "Waiting for a job it depends on to finish.", ""),
        ("DependencyNeverSatisfied", "It depends on a job that ended in a way", "without"),
        ("Reservation", "Waiting for its advance reservation to begin.", ""),
        ("BadConstraints", "No node can satisfy what it asked for", "a node of the partition"),
        ("NodeDown", "A node it needs is down.", "administrators"),
    ],
)
def test_slurms_documented_codes_read_in_plain_words(code: str, words: str, advice: str) -> None:
    for printed in (code, f"({code})"):  # the Reason field, and NODELIST(REASON)
        reason = explain_reason(printed)
        assert reason.code == code
        assert reason.words.startswith(words)
        assert advice in reason.advice


def test_an_unknown_reason_is_shown_as_slurm_says_it() -> None:
    reason = explain_reason("SomethingNew, with detail")
    assert (reason.code, reason.words, reason.advice) == (
        "SomethingNew, with detail",
        "Slurm says: SomethingNew, with detail.",
        "",
    )
