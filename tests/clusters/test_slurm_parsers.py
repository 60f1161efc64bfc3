"""Slurm argv builders, parsers and result checks, on output captured from Slurm 22.05."""

import shlex
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from clusters.slurm import (
    FIELD_SEP,
    SQUEUE_FIELDS,
    AccountingDisabled,
    SlurmError,
    SlurmOutputError,
    check_scancel,
    gpus_from_gres,
    gpus_from_tres,
    nodes_argv,
    normalise_state,
    parse_nodes,
    parse_partitions,
    parse_sacct,
    parse_sbatch,
    parse_squeue,
    parse_time_limit,
    sacct_argv,
    sacct_result,
    scancel_argv,
    squeue_argv,
    squeue_result,
)
from clusters.ssh import CommandResult

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def result(exit_status: int = 0, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(exit_status, stdout.encode(), stderr.encode())


def at(hour: int, minute: int, second: int, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, second, tzinfo=UTC)


def by_id(rows: list) -> dict:
    return {row.job_id: row for row in rows}


# --- squeue -----------------------------------------------------------------------------


def test_squeue_argv_asks_for_every_state_with_a_safe_separator() -> None:
    argv = squeue_argv(job_ids=["10", "20_1", "25+0"], user="alice")
    assert argv[:3] == ["env", "TZ=UTC", "SLURM_TIME_FORMAT=standard"]
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
    rows = by_id(parse_squeue(fixture("squeue_mixed.txt")))
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
    rows = by_id(parse_squeue(fixture("squeue_mixed.txt")))
    assert rows["18"].name == "fx name with spaces | pipe \"dq\" 'sq' ünï ✓"
    assert rows["19"].name == "fx-semi;$(touch /tmp/x)`id`,comma%p"
    assert rows["19"].comment == "a comment, with | pipe"
    # Slurm accepts both a newline and the separator itself in a name.
    assert rows["22"].name == "fx-nl\nsecond\x1fus"
    assert rows["22"].state == "PENDING"


def test_parse_squeue_array_and_het_job_ids() -> None:
    rows = by_id(parse_squeue(fixture("squeue_arrays.txt")))
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
    assert parse_squeue(text.rstrip("\n")) == parse_squeue(text)
    assert parse_squeue(text.removesuffix(FIELD_SEP + "\n")) == parse_squeue(text)


def test_parse_squeue_completing_state() -> None:
    values = ["7", "COMPLETING", "None", "n1", "2026-12-01T01:00:00", "2026-12-01T01:00:09"]
    values += ["5:00", "0", "1", "(null)", "train"]
    (row,) = parse_squeue(FIELD_SEP.join(values) + FIELD_SEP + "\n")
    assert row.state == "COMPLETING" and row.time_limit == timedelta(minutes=5)


def test_parse_squeue_line_with_too_few_fields_is_a_clear_error() -> None:
    text = fixture("squeue_mixed.txt") + f"99{FIELD_SEP}RUNNING{FIELD_SEP}\n"
    with pytest.raises(SlurmOutputError, match=r"expected 11 fields .* got 2: '99"):
        parse_squeue(text)


def test_parse_squeue_unexpected_value_is_a_clear_error() -> None:
    line = FIELD_SEP.join(["7", "RUNNING", "None", "n1", "yesterday", "N/A"])
    line += FIELD_SEP + FIELD_SEP.join(["1:00", "0", "1", "(null)", "x", ""])
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
    assert argv[:4] == ["env", "TZ=UTC", "SLURM_TIME_FORMAT=standard", "sacct"]
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
    rows = by_id(parse_sacct(fixture("sacct_finished.txt")))
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
    row = by_id(parse_sacct(fixture("sacct_finished.txt")))["10"].as_squeue_row()
    assert (row.job_id, row.state, row.exit_code, row.reason) == ("10", "FAILED", 3, None)


@pytest.mark.parametrize("text", ["", "\n", fixture("sacct_empty.txt")])
def test_parse_sacct_empty_output(text: str) -> None:
    assert parse_sacct(text) == []


def test_parse_sacct_line_with_too_few_fields_first_is_a_clear_error() -> None:
    with pytest.raises(SlurmOutputError, match="expected 12 fields"):
        parse_sacct(f"9{FIELD_SEP}COMPLETED\n")


def test_sacct_result_accounting_disabled() -> None:
    with pytest.raises(AccountingDisabled) as caught:
        sacct_result(result(1, "", fixture("sacct_disabled.stderr.txt")))
    assert isinstance(caught.value, SlurmError) and not caught.value.retryable
    assert "accounting storage is disabled" in str(caught.value)


# --- sbatch -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stdout", "stderr", "job_id"),
    [
        ("23\n", "", "23"),
        ("23;sandbox\n", "", "23"),
        # Captured: `sbatch --parsable -N2 -n1` warns and submits.
        ("23\n", "sbatch: Warning: can't run 1 processes on 2 nodes, setting nnodes to 1\n", "23"),
        # An id means the job exists: never report failure (a retry would duplicate it).
        ("24\n", "sbatch: error: something odd after submission\n", "24"),
    ],
)
def test_parse_sbatch_success(stdout: str, stderr: str, job_id: str) -> None:
    assert parse_sbatch(result(0, stdout, stderr)) == job_id


@pytest.mark.parametrize(
    ("exit_status", "stdout", "stderr", "message", "retryable"),
    [
        (
            1,
            "",
            "sbatch: error: invalid partition specified: nope\n"
            "sbatch: error: Batch job submission failed: Invalid partition name specified\n",
            "Invalid partition name specified",
            False,
        ),
        (
            1,
            "",
            "sbatch: error: Batch job submission failed: Requested node configuration is not available\n",
            "Requested node configuration is not available",
            False,
        ),
        (255, "", "sbatch: error: Invalid --time specification\n", "Invalid --time", False),
        (
            1,
            "",
            "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation\n",
            "Socket timed out",
            True,
        ),
        (0, "", "", "printed no job id", False),
        (0, "Submitted batch job 5\n", "", "printed no job id", False),
        (1, "", "", "exit status 1 and nothing on stderr", False),
    ],
)
def test_parse_sbatch_failure(
    exit_status: int, stdout: str, stderr: str, message: str, retryable: bool
) -> None:
    with pytest.raises(SlurmError, match=message) as caught:
        parse_sbatch(result(exit_status, stdout, stderr), command="sbatch --parsable -- x.sh")
    assert caught.value.retryable is retryable
    assert "sbatch --parsable -- x.sh" in str(caught.value)


# --- scancel ----------------------------------------------------------------------------


def test_scancel_argv_quotes_and_validates() -> None:
    assert scancel_argv("20_3") == ["scancel", "--", "20_3"]
    with pytest.raises(ValueError, match="not a Slurm job id"):
        scancel_argv("1 2")


@pytest.mark.parametrize(
    "stderr",
    [
        "",  # scancel is silent (exit 0) for finished and unknown jobs
        "scancel: error: Kill job error on job id 9: Job/step already completing or completed\n",
        "scancel: Terminating job 99999\n"
        "scancel: error: Kill job error on job id 99999: Invalid job id specified\n",
    ],
)
def test_check_scancel_already_finished_is_done(stderr: str) -> None:
    check_scancel(result(0, "", stderr))


def test_check_scancel_permission_denied_raises() -> None:
    stderr = "scancel: error: Kill job error on job id 32: Access/permission denied\n"
    with pytest.raises(SlurmError, match="Access/permission denied") as caught:
        check_scancel(result(210, "", stderr))
    assert not caught.value.retryable


# --- inventory --------------------------------------------------------------------------


def test_parse_partitions_on_captured_output() -> None:
    (partition,) = parse_partitions(fixture("scontrol_show_partition.txt"))
    assert (partition.name, partition.is_default, partition.state) == ("gpu", True, "UP")
    assert partition.max_time is None and partition.default_time is None
    assert (partition.nodes, partition.total_nodes) == ("n[1-2]", 2)


def test_parse_nodes_on_captured_output() -> None:
    n1, n2 = parse_nodes(fixture("scontrol_show_node.txt"))
    assert (n1.name, n1.state, n1.cpus, n1.memory_mb) == ("n1", "ALLOCATED", 2, 12052)
    assert (n1.gpus, n1.gpus_used, n1.free_gpus, n1.partitions) == (2, 0, 2, ("gpu",))
    assert (n2.state, n2.gpus_used, n2.free_gpus) == ("MIXED", 2, 0)
    assert n1.is_available and n2.is_available


def test_parse_nodes_typed_gpus_drain_and_reason_with_spaces() -> None:
    # Shaped like a production node's line; the sandbox declares untyped GPUs.
    text = (
        "NodeName=gpu-a07 Arch=x86_64 CoresPerSocket=32 CPUAlloc=16 CPUTot=64 "
        "Gres=gpu:h100:8(S:0-1) GresDrain=N/A GresUsed=gpu:h100:3(IDX:0-2) "
        "OS=Linux 5.14.0 #1 SMP RealMemory=515000 State=MIXED+DRAIN "
        "Partitions=gpu,long CfgTRES=cpu=64,mem=515000M,billing=64,gres/gpu=8 "
        "AllocTRES=cpu=16,mem=64000M,gres/gpu=3 Reason=bad fan [root@2026-12-01T08:00:00]\n"
        "NodeName=gpu-a08 CPUTot=64 Gres=gpu:h100:8 RealMemory=515000 State=IDLE "
        "Partitions=gpu AllocTRES= \n"
        "NodeName=cpu-01 CPUTot=8 Gres=(null) RealMemory=1000 State=DOWN* Partitions=cpu\n"
    )
    a07, a08, cpu = parse_nodes(text)
    assert (a07.gpus, a07.gpus_used, a07.partitions) == (8, 3, ("gpu", "long"))
    assert a07.reason == "bad fan [root@2026-12-01T08:00:00]"
    assert not a07.is_available and a07.free_gpus == 0
    assert (a08.gpus, a08.gpus_used, a08.free_gpus) == (8, 0, 8)  # no GresUsed: AllocTRES
    assert (cpu.gpus, cpu.is_available) == (0, False)


def test_parse_nodes_refuses_unknown_output() -> None:
    with pytest.raises(SlurmOutputError, match="NodeName"):
        parse_nodes("No nodes in the system\n")


def test_nodes_argv_asks_for_details() -> None:
    assert nodes_argv() == ["scontrol", "--oneliner", "--details", "show", "node"]


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("gpu:2", 2),
        ("gpu:h100:8(S:0-1)", 8),
        ("gpu:h100:4(S:0),gpu:a100:4(S:1)", 8),
        ("gpu:h100:1(IDX:0)", 1),
        ("gpu:(null):0(IDX:N/A)", 0),
        ("gpu:h100:2(S:0,1),shard:h100:16", 2),
        ("(null)", 0),
        ("", 0),
    ],
)
def test_gpus_from_gres(text: str, gpus: int) -> None:
    assert gpus_from_gres(text) == gpus


@pytest.mark.parametrize(
    ("text", "gpus"),
    [
        ("cpu=2,mem=6026M", 0),
        ("billing=2,cpu=2,gres/gpu=1,mem=6026M,node=1", 1),
        ("cpu=64,gres/gpu:h100=8,gres/gpu=8", 8),
        ("cpu=64,gres/gpu:h100=4,gres/gpu:a100=2", 6),
    ],
)
def test_gpus_from_tres(text: str, gpus: int) -> None:
    assert gpus_from_tres(text) == gpus


# --- values -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit"),
    [
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("INVALID", None),
        ("Partition_Limit", None),
        ("30", timedelta(minutes=30)),
        ("1:00", timedelta(minutes=1)),
        ("30:00", timedelta(minutes=30)),
        ("2:00:00", timedelta(hours=2)),
        ("00:01:27", timedelta(minutes=1, seconds=27)),
        ("1-00:00:00", timedelta(days=1)),
        ("1-12", timedelta(days=1, hours=12)),
        ("2-03:04", timedelta(days=2, hours=3, minutes=4)),
    ],
)
def test_parse_time_limit(text: str, limit: timedelta | None) -> None:
    assert parse_time_limit(text) == limit


def test_parse_time_limit_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="not a Slurm time limit"):
        parse_time_limit("soon")


@pytest.mark.parametrize(
    ("text", "state"),
    [
        ("CANCELLED by 1000", "CANCELLED"),
        ("CANCELLED by 0", "CANCELLED"),
        ("COMPLETING", "COMPLETING"),
        ("running", "RUNNING"),
        ("", ""),
    ],
)
def test_normalise_state(text: str, state: str) -> None:
    assert normalise_state(text) == state
