"""The second cluster is a cluster of its own: its login node's sessions submit to its
controller, its jobs run on its nodes (b1, b2), and the sandbox's squeue does not list them."""

import shlex

import pytest

from clusters.sandbox.config import SECOND
from clusters.ssh import Connection
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
