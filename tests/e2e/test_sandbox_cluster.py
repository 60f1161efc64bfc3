"""The sandbox cluster, reached the way the portal reaches any cluster: paramiko, pinned key."""

import hashlib
import re
import shlex
import time

import pytest
from django.conf import settings
from django.core.management import call_command

from clusters import sandbox
from clusters.examples import examples_install
from clusters.hostkeys import fingerprint, parse_host_key
from clusters.models import Cluster
from clusters.sandbox import config, daemons
from clusters.ssh import Connection, Endpoint, HostKeyMismatch
from devtools.keys import new_key_pair
from monitoring.reading.gpu import GPU_QUERY_FIELDS, parse_gpu_csv
from tests.helpers import EXAMPLE, QUEUE_WAIT, sbatch, slurm_name

pytestmark = pytest.mark.sandbox

QUERY = ",".join(GPU_QUERY_FIELDS)


def _wait_for_state(conn: Connection, job_id: str, timeout: float = 90) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        result = conn.run(f"scontrol -o show job {shlex.quote(job_id)}")
        match = re.search(r"\bJobState=(\S+)", result.text)
        state = match[1] if match else state
        if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            return state
        time.sleep(0.5)
    pytest.fail(f"job {job_id} still {state or 'unknown'} after {timeout} s")


def test_two_node_gpu_job_runs_on_two_nodes(alice: Connection) -> None:
    name = slurm_name("e2e")
    script = f"""#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:1
#SBATCH --time=00:02:00
#SBATCH --output={name}.out
export TZ=UTC
srun bash -c 'echo "node=$SLURMD_NODENAME visible=$CUDA_VISIBLE_DEVICES"'
srun bash -c 'nvidia-smi --query-gpu={QUERY} --format=csv,noheader,nounits -i $CUDA_VISIBLE_DEVICES'
srun bash -c 'PORTAL_FAKE_NVSMI_NA=power.draw nvidia-smi --query-gpu={QUERY} --format=csv,noheader,nounits -i $CUDA_VISIBLE_DEVICES'
"""
    alice.upload(f"{name}.sbatch", script.encode(), mode=0o700)
    job_id = sbatch(alice, shlex.quote(name + ".sbatch"))

    assert _wait_for_state(alice, job_id) == "COMPLETED"

    output = alice.run(f"cat {shlex.quote(name + '.out')}").text
    nodes = set(re.findall(r"node=(n\d) visible=\d", output))
    assert len(nodes) == 2 and nodes <= set(config.NODES), output
    gpu_lines = "\n".join(line for line in output.splitlines() if line.startswith("20"))
    samples, rejected = parse_gpu_csv(gpu_lines)
    assert rejected == []
    assert len(samples) == 4
    # One GPU per node: two distinct boards, each reporting plausible numbers.
    assert len({s.uuid for s in samples}) == 2
    measured = [s for s in samples if s.power_w is not None]
    not_available = [s for s in samples if s.power_w is None]
    assert len(measured) == 2 and len(not_available) == 2
    for sample in measured:
        assert 0 <= (sample.utilization or 0) <= 100
        assert sample.memory_total_mib == 143771
        assert 0 < sample.power_w <= 700  # type: ignore[operator]


def test_job_sees_its_gpu_indices_in_scontrol(alice: Connection) -> None:
    job_id = sbatch(
        alice, f"--job-name={slurm_name('two-gpus')} --nodes=1 --gres=gpu:2 --wrap 'sleep 3'"
    )
    try:
        deadline = time.monotonic() + QUEUE_WAIT  # other workers' jobs may hold the GPUs
        detail = ""
        while time.monotonic() < deadline and "IDX:" not in detail:
            detail = alice.run(f"scontrol show job -d {shlex.quote(job_id)}").text
            time.sleep(0.3)
        assert re.search(r"GRES=gpu:2\(IDX:0-1\)", detail), detail
    finally:
        alice.run(f"scancel {shlex.quote(job_id)}")


def test_wrong_pinned_host_key_is_refused(sandbox_cluster: Cluster, sandbox_info) -> None:
    _, impostor = new_key_pair()
    endpoint = Endpoint(
        cluster_name=sandbox_cluster.name,
        host=sandbox_info.ssh_host,
        port=sandbox_info.ssh_port,
        host_key=impostor,
        username="alice",
        private_key=sandbox_info.users["alice"],
    )
    with pytest.raises(HostKeyMismatch) as caught:
        Connection(endpoint)
    message = str(caught.value)
    assert "sandbox" in message
    assert fingerprint(*parse_host_key(impostor)) in message
    assert sandbox_cluster.host_key_fingerprint in message
    assert caught.value.retryable is False


def test_bob_cannot_read_alices_files(alice: Connection, bob: Connection) -> None:
    alice.upload("secret.txt", b"alice's notes\n", mode=0o644)
    assert alice.run("cat ~/secret.txt").text == "alice's notes\n"
    attempt = bob.run("cat /home/alice/secret.txt")
    assert attempt.exit_status != 0
    assert "Permission denied" in attempt.error_text
    assert bob.run("ls /home/alice").exit_status != 0


def _daemon_pids() -> dict[str, int | None]:
    paths = config.Paths.of(settings.SANDBOX_STATE_DIR)
    return {daemon.name: daemons.running_pid(daemon) for daemon in daemons.daemons(paths)}


def test_up_again_restarts_nothing_and_registers_the_cluster(
    db: None, sandbox_info, capsys
) -> None:
    before = _daemon_pids()
    call_command("sandbox", "up")
    assert _daemon_pids() == before  # nothing restarted: how long it takes is bench material
    cluster = Cluster.objects.get(name="sandbox")
    assert cluster.host_key == sandbox_info.host_key
    assert sorted(cluster.accounts.values_list("username", flat=True)) == ["alice", "bob", "carol"]
    assert all(not a.is_service_account for a in cluster.accounts.all())
    out = capsys.readouterr().out
    assert cluster.host_key_fingerprint in out
    # make run's demo users find the README's example where their commands start.
    assert "Example trainer for alice: ~/portal-examples" in out
    assert "Example trainer for bob: ~/portal-examples" in out
    # Up and taking jobs (other tests' jobs may be on them: mixed, allocated, completing).
    up = r"\s+\S+\s+(idle|mixed|allocated|completing)\b"
    assert all(re.search(node + up, out) for node in config.NODES), out


def test_status_names_daemons_and_gpus(sandbox_info) -> None:
    report = sandbox.status(settings.SANDBOX_STATE_DIR)
    slurmds = [f"slurmd {node}" for node in config.NODES]
    for daemon in ("slurmctld", *slurmds, "sshd", "munged"):
        assert re.search(rf"{daemon}\s*:?\s+running", report), report
    assert "gpu:2" in report


def test_the_example_trainer_lands_in_each_users_home_for_them_alone(
    sandbox_cluster: Cluster, alice: Connection, bob: Connection
) -> None:
    data = EXAMPLE.read_bytes()
    done = examples_install(cluster=sandbox_cluster, files={"ddp_train.py": data})
    assert done == {user: "~/portal-examples" for user in config.USERS}
    digest = hashlib.sha256(data).hexdigest()
    for user in (alice, bob):
        check = user.run("sha256sum portal-examples/ddp_train.py; stat -c %a portal-examples")
        assert check.text.split()[:3] == [digest, "portal-examples/ddp_train.py", "700"]
