"""Slurm argv builders, parsers and result checks for squeue and sacct, on output captured from Slurm 22.05."""

import shlex
from datetime import UTC, datetime, timedelta

import pytest

from clusters.slurm import (
    FIELD_SEP,
    SQUEUE_FIELDS,
    AccountingDisabled,
    SlurmError,
    SlurmOutputError,
    parse_sacct,
    parse_squeue,
    sacct_argv,
    sacct_result,
    squeue_argv,
    squeue_result,
)
from clusters.slurm.parsers import cpus_from_tres, parse_time_limit
from tests.clusters.slurm_output import (
    SACCT_FIELDS_2026_12_01,
    SQUEUE_FIELDS_2026_12_01,
    at,
    by_id,
    fixture,
    result,
)

OLD = SQUEUE_FIELDS_2026_12_01

# --- squeue -----------------------------------------------------------------------------


def test_squeue_argv_asks_for_every_state_with_a_safe_separator() -> None:
    argv = squeue_argv(job_ids=["10", "20_1", "25+0"], user="alice")
    assert argv[0] == "squeue"
    assert "--states=all" in argv and "--noheader" in argv
    assert "--jobs=10,20_1,25+0" in argv and "--user=alice" in argv
    (format_arg,) = [arg for arg in argv if arg.startswith("--Format=")]
    fields = format_arg.removeprefix("--Format=").split(",")
    assert fields == [f"{field}:{FIELD_SEP}" for field in SQUEUE_FIELDS]
    assert SQUEUE_FIELDS[-1] == "Name"  # the free-text field comes last


def test_squeue_argv_keeps_a_hostile_name_in_one_argument() -> None:
    name = "a b;$(touch /tmp/canary)`id`'\""
    argv = squeue_argv(names=[name])
    assert f"--name={name}" in argv
    assert shlex.split(shlex.join(argv)) == argv


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"job_ids": []}, "empty"),
        ({"job_ids": ["12; rm -rf ~"]}, "not a Slurm job id"),
        ({"job_ids": ["abc"]}, "not a Slurm job id"),
        ({"names": ["a,b"]}, "cannot filter"),
        ({"names": [""]}, "cannot filter"),
    ],
)
def test_squeue_argv_refuses_what_slurm_would_misread(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        squeue_argv(**kwargs)


def test_parse_squeue_every_state_on_captured_output() -> None:
    rows = by_id(parse_squeue(fixture("squeue_mixed.txt"), fields=SQUEUE_FIELDS_2026_12_01))
    assert len(rows) == 23

    failed = rows["10"]
    assert (failed.name, failed.state, failed.reason) == ("fx-failed3", "FAILED", "NonZeroExitCode")
    assert (failed.exit_code, failed.signal) == (3, None)  # raw wait status 768
    assert failed.start_time == at(1, 5, 7) and failed.node_list == "n2"

    timeout = rows["8"]
    assert (timeout.state, timeout.reason, timeout.signal) == ("TIMEOUT", "TimeLimit", 15)
    assert timeout.time_limit == timedelta(minutes=1)
    assert timeout.end_time == at(1, 6, 34)

    cancelled = rows["12"]
    assert (cancelled.state, cancelled.exit_code, cancelled.signal) == ("CANCELLED", 0, 15)

    running = rows["16"]
    assert (running.state, running.reason, running.node_count) == ("RUNNING", None, 2)
    assert running.node_list == "n[1-2]" and running.time_limit == timedelta(minutes=20)

    held = rows["14"]
    assert (held.state, held.reason, held.node_list) == ("PENDING", "JobHeldUser", "")
    assert held.start_time is None and held.end_time is None and held.time_limit is None

    begin = rows["13"]  # pending with --begin: Slurm prints the expected start and end
    assert (begin.start_time, begin.end_time) == (at(3, 5, 6), at(3, 5, 6, day=2))
    assert begin.time_limit == timedelta(days=1)

    expected = rows["18"]  # pending, expected start known, no limit: end is NONE
    assert expected.start_time == at(1, 25, 13) and expected.end_time is None

    assert rows["17"].reason == "Resources"
    assert rows["15"].state == "FAILED" and rows["15"].reason == "BadConstraints"
    assert rows["9"].comment == ""  # (null)


def test_parse_squeue_keeps_hostile_names_whole() -> None:
    rows = by_id(parse_squeue(fixture("squeue_mixed.txt"), fields=SQUEUE_FIELDS_2026_12_01))
    assert rows["18"].name == "fx name with spaces | pipe \"dq\" 'sq' ünï ✓"
    assert rows["19"].name == "fx-semi;$(touch /tmp/x)`id`,comma%p"
    assert rows["19"].comment == "a comment, with | pipe"
    # Slurm accepts both a newline and the separator itself in a name.
    assert rows["22"].name == "fx-nl\nsecond\x1fus"
    assert rows["22"].state == "PENDING"


def test_parse_squeue_array_and_het_job_ids() -> None:
    rows = by_id(parse_squeue(fixture("squeue_arrays.txt"), fields=SQUEUE_FIELDS_2026_12_01))
    assert rows["20_0"].state == "RUNNING" and rows["20_0"].end_time is None
    assert rows["20_[2-3%2]"].reason == "JobArrayTaskLimit"
    assert rows["21_5"].state == "COMPLETED"
    assert {rows["25+0"].base_job_id, rows["21_5"].base_job_id} == {"25", "21"}
    assert rows["20_[2-3%2]"].base_job_id == "20"
    assert rows["16"].state == "CANCELLED" and rows["16"].end_time == at(1, 6, 55)


@pytest.mark.parametrize("text", ["", "\n", fixture("squeue_unknown_ids.txt")])
def test_parse_squeue_empty_output(text: str) -> None:
    assert parse_squeue(text) == []


def test_parse_squeue_tolerates_a_stripped_final_terminator() -> None:
    text = fixture("squeue_arrays.txt")
    assert parse_squeue(text.rstrip("\n"), fields=OLD) == parse_squeue(text, fields=OLD)
    assert parse_squeue(text.removesuffix(FIELD_SEP + "\n"), fields=OLD) == parse_squeue(
        text, fields=OLD
    )


def test_parse_squeue_completing_state() -> None:
    values = ["7", "COMPLETING", "None", "n1", "2026-12-01T01:00:00", "2026-12-01T01:00:09"]
    values += ["5:00", "0", "1", "alice", "2026-12-01T00:59:58", "(null)", "train"]
    (row,) = parse_squeue(FIELD_SEP.join(values) + FIELD_SEP + "\n")
    assert row.state == "COMPLETING" and row.time_limit == timedelta(minutes=5)
    assert (row.user, row.submit_time) == ("alice", at(0, 59, 58))


def test_parse_squeue_line_with_too_few_fields_is_a_clear_error() -> None:
    text = fixture("squeue_mixed.txt") + f"99{FIELD_SEP}RUNNING{FIELD_SEP}\n"
    with pytest.raises(SlurmOutputError, match=r"expected 11 fields .* got 2: '99"):
        parse_squeue(text, fields=OLD)
    # Output of the old format read as the current one is format drift, never rows.
    with pytest.raises(SlurmOutputError, match=r"expected 13 fields .*UserName, SubmitTime"):
        parse_squeue(fixture("squeue_mixed.txt"))


def test_parse_squeue_unexpected_value_is_a_clear_error() -> None:
    line = FIELD_SEP.join(["7", "RUNNING", "None", "n1", "yesterday", "N/A"])
    line += FIELD_SEP + FIELD_SEP.join(["1:00", "0", "1", "bob", "N/A", "(null)", "x", ""])
    with pytest.raises(SlurmOutputError, match="yesterday"):
        parse_squeue(line + "\n")


def test_squeue_result_treats_one_unknown_job_id_as_no_rows() -> None:
    stderr = "slurm_load_jobs error: Invalid job id specified\n"
    assert squeue_result(result(1, "", stderr)) == []


def test_squeue_result_fails_on_stderr_error_despite_exit_0() -> None:
    # Seen when asking for `-O ExitCode` (the field is exit_code): exit 0, column empty.
    stderr = "squeue: error: Invalid job format specification: ExitCode\n"
    with pytest.raises(SlurmError, match="Invalid job format specification") as caught:
        squeue_result(result(0, fixture("squeue_mixed.txt"), stderr))
    assert not caught.value.retryable


def test_squeue_result_controller_down_is_retryable() -> None:
    stderr = "slurm_load_jobs error: Unable to contact slurm controller (connect failure)\n"
    with pytest.raises(SlurmError) as caught:
        squeue_result(result(1, "", stderr))
    assert caught.value.retryable and caught.value.command == "squeue"


# --- sacct ------------------------------------------------------------------------------


def test_sacct_argv_has_a_bounded_window_and_safe_delimiter() -> None:
    since = datetime(2026, 11, 24, 1, 0, tzinfo=UTC)
    argv = sacct_argv(job_ids=["9", "21_5"], since=since)
    assert argv[0] == "sacct" and "--allusers" not in argv
    assert "--allusers" in sacct_argv(job_ids=["9"], since=since, all_users=True)
    for flag in ("--allocations", "--noheader", "--parsable2", f"--delimiter={FIELD_SEP}"):
        assert flag in argv
    assert "--starttime=2026-11-24T01:00:00" in argv and "--endtime=now" in argv
    assert "--jobs=9,21_5" in argv
    assert argv[-1].startswith("--format=JobID,") and argv[-1].endswith(",JobName")


def test_sacct_argv_converts_since_to_utc_and_refuses_naive_times() -> None:
    from zoneinfo import ZoneInfo

    since = datetime(2026, 12, 1, 9, 30, tzinfo=ZoneInfo("Europe/Berlin"))
    assert "--starttime=2026-12-01T08:30:00" in sacct_argv(job_ids=["1"], since=since)
    with pytest.raises(ValueError, match="timezone-aware"):
        sacct_argv(job_ids=["1"], since=datetime(2026, 12, 1))


def test_parse_sacct_states_exit_codes_and_gpus() -> None:
    rows = by_id(parse_sacct(fixture("sacct_finished.txt"), fields=SACCT_FIELDS_2026_12_01))
    assert len(rows) == 13
    assert (rows["10"].state, rows["10"].exit_code, rows["10"].signal) == ("FAILED", 3, None)
    assert (rows["12"].state, rows["12"].signal) == ("CANCELLED", 15)  # "CANCELLED by 1001"
    assert (rows["40"].state, rows["40"].signal) == ("CANCELLED", 9)  # "CANCELLED by 0", 0:9
    assert (rows["41"].state, rows["41"].signal) == ("OUT_OF_MEMORY", 125)
    assert rows["41"].time_limit is None  # Partition_Limit
    assert rows["8"].elapsed == timedelta(minutes=1, seconds=27)
    assert rows["8"].end_time == at(1, 6, 34)

    running = rows["16"]
    assert running.end_time is None and running.gpus == 2 and running.node_count == 2
    assert running.cpus == 2  # AllocTRES cpu=2: both nodes together
    assert rows["9"].cpus == 1 and rows["17"].cpus == 0  # no TRES while pending
    assert running.comment == "portal-3f9c2a1e"
    pending = rows["17"]
    assert (pending.start_time, pending.node_list, pending.gpus) == (None, "", 0)
    assert pending.time_limit == timedelta(hours=2)

    big = rows["42"]  # typed and untyped GPU TRES: counted once
    assert big.gpus == 8 and big.elapsed == timedelta(days=1, hours=5)
    assert big.name == "train llama | \"big\" 'run' ✓"
    assert rows["43"].name == "fx-nl\nsecond\x1fus"
    assert {"21_5", "20_[2-3%2]", "25+0"} <= rows.keys()


def test_sacct_row_as_squeue_row() -> None:
    row = by_id(parse_sacct(fixture("sacct_finished.txt"), fields=SACCT_FIELDS_2026_12_01))[
        "10"
    ].as_squeue_row()
    assert (row.job_id, row.state, row.exit_code, row.reason) == ("10", "FAILED", 3, None)


@pytest.mark.parametrize("text", ["", "\n", fixture("sacct_empty.txt")])
def test_parse_sacct_empty_output(text: str) -> None:
    assert parse_sacct(text) == []


def test_parse_sacct_line_with_too_few_fields_first_is_a_clear_error() -> None:
    with pytest.raises(SlurmOutputError, match="expected 14 fields"):
        parse_sacct(f"9{FIELD_SEP}COMPLETED\n")


def test_sacct_result_accounting_disabled() -> None:
    with pytest.raises(AccountingDisabled) as caught:
        sacct_result(result(1, "", fixture("sacct_disabled.stderr.txt")))
    assert isinstance(caught.value, SlurmError) and not caught.value.retryable
    assert "accounting storage is disabled" in str(caught.value)


@pytest.mark.parametrize(
    ("tres", "cpus"),
    [
        ("billing=4,cpu=4,gres/gpu=2,mem=12052M,node=2", 4),
        ("cpu=16", 16),
        ("billing=1,mem=3013M,node=1", 0),
        ("", 0),
        ("billing=2,cpu=2x,node=1", 0),  # never a prefix of a longer word
    ],
)
def test_cpus_from_tres(tres: str, cpus: int) -> None:
    assert cpus_from_tres(tres) == cpus


@pytest.mark.parametrize(
    "text", ["1" + "0" * 29, "1" + "0" * 29 + "-00:00:00", "1:1" + "0" * 29 + ":00"]
)
def test_a_time_limit_past_any_duration_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError, match="out of range"):
        parse_time_limit(text)


def test_parse_squeue_reads_slurms_start_estimate_of_a_job_waiting_on_resources() -> None:
    # squeue_start_estimate.txt: 809 waits behind 808, which holds every GPU until 21:05:13.
    rows = by_id(
        parse_squeue(fixture("squeue_start_estimate.txt"), fields=SQUEUE_FIELDS_2026_12_01)
    )
    waiting, blocker = rows["809"], rows["808"]
    assert (waiting.state, waiting.reason, waiting.node_list) == ("PENDING", "Resources", "")
    assert waiting.start_time == at(21, 5, 13) == blocker.end_time
    assert waiting.end_time == at(21, 7, 13)  # the estimate plus its 2 min limit
    # `squeue --start` prints the same figure (captured the same second).
    start_line = fixture("squeue_start.txt").splitlines()[1].split()
    assert start_line[0] == "809" and start_line[5] == "2026-12-01T21:05:13"
