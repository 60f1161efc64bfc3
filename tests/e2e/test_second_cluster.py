"""The second cluster is a cluster of its own: its login node's sessions submit to its
controller, its jobs run on its nodes (b1, b2), the sandbox's squeue does not list them,
and its own slurmdbd records them."""

import shlex

import pytest
from django.conf import settings

from clusters.sandbox import daemons, second, status
from clusters.sandbox.config import SECOND, Paths
from clusters.ssh import Connection
from devtools.servers import wait_until
from tests.fixtures.sandbox import sandbox_setup
from tests.helpers import QUEUE_WAIT, sbatch, slurm_name, wait_for

pytestmark = pytest.mark.sandbox


def _listed(connection: Connection, name: str) -> list[str]:
    """`state node` of the jobs named `name` in the squeue of `connection`'s cluster."""
    listed = connection.run(f"squeue --noheader --name={shlex.quote(name)} --format='%T %N'")
    assert listed.exit_status == 0, listed.error_text
    return listed.text.splitlines()


def test_a_job_on_the_second_cluster_runs_on_its_nodes_unseen_by_the_first(
    second_cluster, alice: Connection, alice_b: Connection
) -> None:
    assert alice_b.run("echo $SLURM_CONF").text.strip() == second_cluster.slurm_conf
    name = slurm_name("second")
    job_id = sbatch(
        alice_b,
        f"--job-name={name} --output={name}.out --gres=gpu:1 --time=2 "
        """--wrap 'echo "$SLURM_CLUSTER_NAME $SLURMD_NODENAME"; sleep 60'""",
    )
    try:
        wait_for(lambda: alice_b.run(f"cat {name}.out").text.strip(), QUEUE_WAIT, "the job to run")
        cluster, node = alice_b.run(f"cat {name}.out").text.split()
        assert cluster == SECOND.name and node in SECOND.nodes
        assert _listed(alice_b, name) == [f"RUNNING {node}"]
        assert _listed(alice, name) == []
    finally:
        alice_b.run(f"scancel {shlex.quote(job_id)}")


def test_sacct_on_the_second_clusters_login_node_lists_the_job_alice_ran_there(
    second_sandbox, second_cluster, alice_b: Connection
) -> None:
    """Its own slurmdbd records its jobs under its own cluster name, and a tenant asks it
    from its login node (through the tenants' firewall, on the slurmdbd's own port)."""
    if not second_sandbox.accounting:
        pytest.skip("the sandbox runs without slurmdbd here (SANDBOX_ACCOUNTING=0 or no MariaDB)")
    name = slurm_name("second-sacct")
    job_id = sbatch(alice_b, f"--job-name={name} --output=/dev/null --time=2 --wrap true")
    sacct = (
        f"sacct --noheader --parsable2 --allocations --jobs={job_id} "
        "--format=JobID,JobName,User,Cluster,State"
    )

    expected = f"{job_id}|{name}|alice|{SECOND.name}|COMPLETED"
    said: list[str] = []

    def recorded() -> bool:
        listed = alice_b.run(sacct)
        assert listed.exit_status == 0, listed.error_text
        said.append(listed.text.strip())
        return said[-1] == expected

    # A short job's end can reach slurmdbd before its start does: the record is a
    # placeholder (`allocation`, root's) until then.
    try:
        wait_until(recorded, QUEUE_WAIT, f"sacct on {SECOND.name} to list {expected}")
    except TimeoutError as exc:
        pytest.fail(f"{exc}; it said {said[-1]!r}")


def test_up_again_restarts_nothing_and_status_lists_its_slurmdbd(second_sandbox) -> None:
    """`up` while it runs (each test's fixture calls it) leaves every daemon, its slurmdbd
    included, as it was; `sandbox status --second` names that slurmdbd."""
    state_dir = settings.SANDBOX_STATE_DIR
    paths = Paths.second(state_dir)
    before = {x.name: daemons.running_pid(x) for x in daemons.daemons(paths)}
    assert all(before.values()), before
    assert ("slurmdbd" in before) == second_sandbox.accounting
    with sandbox_setup(paths.root):
        again = second.up(state_dir)
    assert again.accounting == second_sandbox.accounting
    assert {x.name: daemons.running_pid(x) for x in daemons.daemons(paths)} == before
    if second_sandbox.accounting:
        assert f"slurmdbd    running (pid {before['slurmdbd']})" in status(state_dir, second=True)
