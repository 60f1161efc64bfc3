"""The Slurm adapter against the sandbox cluster, as alice over the real SSH gateway."""

import os
import shlex
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from clusters.sandbox.cluster import MIN_NODE_CPUS
from clusters.sandbox.config import NODES, Paths
from clusters.slurm import Slurm, SlurmError, SlurmTools, SqueueRow
from clusters.ssh import Connection
from tests.helpers import slurm_name

pytestmark = pytest.mark.sandbox


def _slurm(connection: Connection) -> Slurm:
    """The adapter as the portal runs it there: the sandbox's slurm.conf, a clean environment."""
    conf = Paths.of(settings.SANDBOX_STATE_DIR).slurm_conf
    return Slurm(connection, tools=SlurmTools(conf=str(conf)))


def _upload_script(conn: Connection, name: str, *options: str) -> str:
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}", "#SBATCH --output=/dev/null"]
    lines += [f"#SBATCH {option}" for option in options]
    path = f"{name}.sbatch"
    conn.upload(path, ("\n".join([*lines, "sleep 60", ""])).encode(), mode=0o700)
    return path


def _wait_for(slurm: Slurm, job_id: str, states: set[str], timeout: float = 15) -> SqueueRow:
    deadline = time.monotonic() + timeout
    while True:
        (row,) = slurm.queue([job_id])
        if row.state in states or time.monotonic() > deadline:
            return row
        time.sleep(0.3)


def test_submit_find_queue_cancel(alice: Connection) -> None:
    slurm = _slurm(alice)
    name = slurm_name("adapter")
    job_id = slurm.submit(_upload_script(alice, name, "--time=2"))
    try:
        assert job_id.isdigit()

        (found,) = slurm.find_by_name(name)
        assert (found.job_id, found.name) == (job_id, name)
        assert found.state in {"PENDING", "RUNNING"}

        (queued,) = slurm.queue([job_id])
        assert queued.job_id == job_id and queued.time_limit is not None
        assert queued.time_limit.total_seconds() == 120
    finally:
        slurm.cancel(job_id)

    assert _wait_for(slurm, job_id, {"CANCELLED"}).state == "CANCELLED"
    slurm.cancel(job_id)  # twice: harmless
    slurm.cancel("999999")  # unknown to Slurm: harmless too


def test_queue_of_unknown_or_no_jobs_is_empty(alice: Connection) -> None:
    slurm = _slurm(alice)
    assert slurm.queue([]) == []
    assert slurm.queue(["999999"]) == []  # squeue exits 1 for one unknown id
    assert slurm.queue(["999998", "999999"]) == []


def test_bad_partition_names_slurms_message(alice: Connection) -> None:
    name = slurm_name("adapter")
    path = _upload_script(alice, name, "--partition=nope")
    with pytest.raises(SlurmError, match="Invalid partition name specified") as caught:
        _slurm(alice).submit(path)
    assert not caught.value.retryable
    assert path in caught.value.command


def test_cancel_of_another_users_job_is_refused(alice: Connection, bob: Connection) -> None:
    alice_slurm = _slurm(alice)
    job_id = alice_slurm.submit(_upload_script(alice, slurm_name("adapter"), "--hold"))
    try:
        with pytest.raises(SlurmError, match="Access/permission denied"):
            _slurm(bob).cancel(job_id)
    finally:
        alice_slurm.cancel(job_id)


def test_partitions_and_nodes(alice: Connection) -> None:
    slurm = _slurm(alice)
    (partition,) = slurm.partitions()
    assert (partition.name, partition.is_default, partition.state) == ("gpu", True, "UP")
    assert partition.total_nodes == len(NODES) and partition.max_time is None

    nodes = {node.name: node for node in slurm.nodes()}
    assert set(nodes) == set(NODES)
    cpus = max(os.cpu_count() or 1, MIN_NODE_CPUS)  # what each node declares
    for node in nodes.values():
        assert (node.gpus, node.cpus, node.partitions) == (2, cpus, ("gpu",))
        assert 0 <= node.gpus_used <= 2 and node.is_available


def test_hostile_names_run_nothing(alice: Connection) -> None:
    canary = Path(f"/tmp/canary-{uuid.uuid4().hex[:8]}")
    slurm = _slurm(alice)
    hostile = [
        f"x; touch {canary}",
        f"$(touch {canary})",
        f"`touch {canary}`",
        f"x' ; touch {canary}; echo '",
        f'x" ; touch {canary}; echo "',
        f"a,b && touch {canary}",  # a comma: matched here, not by squeue --name
    ]
    for name in hostile:
        assert slurm.find_by_name(name) == []
    # One such name on a real job comes back exactly, through squeue and the parser.
    name = slurm_name(f"odd $(touch {canary}) `x` 'q' \"dq\" | ✓")
    submitted = alice.run(
        shlex.join(["sbatch", "--parsable", "--hold", f"--job-name={name}", "--wrap=true"])
    )
    job_id = submitted.text.strip()
    try:
        (found,) = slurm.find_by_name(name)
        assert (found.job_id, found.name) == (job_id, name)
    finally:
        slurm.cancel(job_id)
    assert not canary.exists()


def test_find_by_name_without_accounting_falls_back_to_nothing(
    alice: Connection, sandbox_info
) -> None:
    slurm = _slurm(alice)
    assert slurm.find_by_name(f"never-submitted-{uuid.uuid4().hex}") == []
    # Without slurmdbd, sacct said storage is disabled and is not asked again.
    assert slurm._accounting is sandbox_info.accounting
