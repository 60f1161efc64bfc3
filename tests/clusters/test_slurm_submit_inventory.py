"""Slurm argv builders and parsers for sbatch, scancel, the inventory and Slurm values, on captured output."""

from datetime import timedelta

import pytest

from clusters.slurm import (
    SlurmError,
    SlurmOutputError,
    check_scancel,
    gpus_from_gres,
    gpus_from_tres,
    nodes_argv,
    normalise_state,
    parse_nodes,
    parse_partitions,
    parse_sbatch,
    parse_time_limit,
    scancel_argv,
)
from clusters.status import free_cpus, free_memory_mb
from tests.clusters.slurm_output import fixture, result

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
    # CPUs and memory are what a GPU job often waits on: n1 has free GPUs and no free CPU.
    assert (n1.cpus_used, free_cpus(n1), n1.memory_used_mb, free_memory_mb(n1)) == (
        2,
        0,
        6026,
        6026,
    )
    assert (n2.cpus_used, free_cpus(n2), n2.memory_used_mb, free_memory_mb(n2)) == (
        1,
        1,
        3013,
        9039,
    )


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
