"""A submission leaves out its cluster's avoided nodes through the attempt's --exclude, never
so many that the job cannot fit; a restart keeps its own exclusions, not the avoided ones."""

from typing import cast

import pytest

from clusters.avoidance import node_avoid, node_avoid_clear, submission_avoidances
from clusters.slurm import Partition, Slurm, SlurmError, parse_partitions
from jobs.avoidance import attempt_avoid_nodes, own_exclusions
from jobs.enums import FailureClass, State
from jobs.models import Attempt, JobEvent
from jobs.restart import attempt_restart
from jobs.scripts import RunDir, render_batch_script
from tests import factories
from tests.clusters.slurm_output import fixture

# Captured `scontrol --oneliner show partition` of the sandbox, grown to four nodes.
FOUR_NODES = (
    fixture("scontrol_show_partition.txt")
    .replace("Nodes=n[1-2]", "Nodes=n[1-4]")
    .replace("TotalNodes=2", "TotalNodes=4")
)


class _Cluster:
    """The Slurm of a cluster whose only partition is `gpu`, n1-n4 (what avoidance asks)."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.asked = 0

    def partitions(self) -> list[Partition]:
        self.asked += 1
        if self.fails:
            raise SlurmError("scontrol", "slurm_load_partitions: timed out", retryable=True)
        return parse_partitions(FOUR_NODES)


@pytest.fixture
def cluster(db):
    return factories.cluster()


def _submit(attempt: Attempt, slurm: _Cluster | None = None) -> str:
    attempt_avoid_nodes(attempt=attempt, slurm=cast(Slurm, slurm or _Cluster()))
    return render_batch_script(job=attempt.job, attempt=attempt, run_dir=RunDir("/r/1"))


def test_an_avoided_node_is_left_out_and_the_timeline_says_why(project, member, cluster) -> None:
    node_avoid(cluster=cluster, node="n3", reason="judged bad (score 3.0): 3 x GPU fault")
    _, attempt = factories.job(project, member, cluster, nodes=2, partition="gpu")
    script = _submit(attempt)
    assert "#SBATCH --exclude=n3" in script
    assert Attempt.objects.get(pk=attempt.pk).excluded_nodes == "n3"
    (event,) = JobEvent.objects.filter(attempt=attempt)
    assert (
        event.reason
        == "Submitted without avoided nodes (n3: judged bad (score 3.0): 3 x GPU fault)."
    )
    record = submission_avoidances(attempt_uuids=[attempt.uuid])[attempt.uuid]
    assert record.nodes == {"n3": "judged bad (score 3.0): 3 x GPU fault"}


def test_nothing_avoided_asks_slurm_nothing_and_excludes_nothing(project, member, cluster) -> None:
    _, attempt = factories.job(project, member, cluster, nodes=2)
    slurm = _Cluster()
    script = _submit(attempt, slurm)
    assert "--exclude" not in script and slurm.asked == 0
    assert not JobEvent.objects.filter(attempt=attempt).exists()


def test_a_job_needing_every_node_but_one_keeps_the_rest_and_says_so(
    project, member, cluster
) -> None:
    for node in ("n1", "n2", "n3"):
        node_avoid(cluster=cluster, node=node, reason=f"{node} bad")
    # The blank partition is Slurm's default one (gpu, four nodes); the job needs three.
    _, attempt = factories.job(project, member, cluster, nodes=3, partition="")
    script = _submit(attempt)
    excluded = Attempt.objects.get(pk=attempt.pk).excluded_nodes.split(",")
    assert len(excluded) == 1  # 4 nodes - 3 needed
    assert f"#SBATCH --exclude={excluded[0]}" in script
    notes = list(JobEvent.objects.filter(attempt=attempt).values_list("reason", flat=True))
    assert any(
        "judged bad but not left out: the job needs 3 of partition gpu's 4" in n for n in notes
    )


def test_an_unreadable_partition_list_submits_without_avoidance(project, member, cluster) -> None:
    node_avoid(cluster=cluster, node="n3", reason="bad")
    _, attempt = factories.job(project, member, cluster, nodes=1, partition="gpu")
    assert "--exclude" not in _submit(attempt, _Cluster(fails=True))


def test_a_retried_submission_starts_again_from_its_own_exclusions(
    project, member, cluster, staff
) -> None:
    node_avoid(cluster=cluster, node="n3", reason="bad")
    _, attempt = factories.job(project, member, cluster, nodes=1, partition="gpu")
    Attempt.objects.filter(pk=attempt.pk).update(excluded_nodes="n1")
    attempt.refresh_from_db()
    _submit(attempt)
    assert attempt.excluded_nodes == "n1,n3"
    _submit(attempt)  # the same try again: no second note, the same list
    assert attempt.excluded_nodes == "n1,n3"
    assert JobEvent.objects.filter(attempt=attempt).count() == 1
    node_avoid_clear(cluster=cluster, node="n3", user=staff)
    assert "#SBATCH --exclude=n1\n" in _submit(attempt)  # put back before the retry
    assert own_exclusions(attempt) == ["n1"]


def test_a_restart_keeps_its_failed_node_and_reads_avoided_ones_afresh(
    project, member, cluster, staff
) -> None:
    node_avoid(cluster=cluster, node="n3", reason="bad")
    _, attempt = factories.job(project, member, cluster, nodes=1, partition="gpu", max_restarts=2)
    attempt.account = factories.account(cluster, member)
    attempt.save()
    _submit(attempt)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED, node_list="n2")
    attempt.refresh_from_db()
    node_avoid_clear(cluster=cluster, node="n3", user=staff)  # put back meanwhile
    second = attempt_restart(
        attempt=attempt, failure_class=FailureClass.GPU_HARDWARE, resume_from="", failed_node="n2"
    )
    assert second is not None and second.excluded_nodes == "n2"  # not n3: it was put back
    assert "#SBATCH --exclude=n2\n" in _submit(second)


def test_the_job_page_says_which_nodes_were_avoided_and_why(
    client, project, member, outsider, cluster
) -> None:
    node_avoid(cluster=cluster, node="n3", reason="judged bad (score 3.0): 3 x GPU fault")
    job, attempt = factories.job(project, member, cluster, nodes=4, partition="gpu")
    node_avoid(cluster=cluster, node="n4", reason="judged bad (score 2.6): 2 x hang")
    _submit(attempt)  # needs all four: none left out, and it says so
    second = Attempt.objects.create(job=job, number=2)
    job.nodes = 2
    job.save()
    second.job = job
    _submit(second)
    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert (
        "Attempt 2 ran without node <strong>n4</strong>: judged bad (score 2.6): 2 x hang." in page
    )
    assert "Attempt 2 ran without node <strong>n3</strong>" in page
    assert "Attempt 1: Nodes n4, n3 are judged bad but not left out" in page
    client.force_login(outsider)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404


def test_the_failures_api_says_which_nodes_were_avoided(
    client, project, member, outsider, cluster
) -> None:
    node_avoid(cluster=cluster, node="n3", reason="judged bad (score 3.0): 3 x GPU fault")
    job, attempt = factories.job(project, member, cluster, nodes=2, partition="gpu")
    _submit(attempt)
    client.force_login(member)
    body = client.get(f"/api/v1/jobs/{job.pk}/failures").json()
    assert body["avoided_nodes"] == [
        {
            "attempt": 1,
            "nodes": [{"node": "n3", "reason": "judged bad (score 3.0): 3 x GPU fault"}],
            "kept_note": "",
        }
    ]
    client.force_login(outsider)
    assert client.get(f"/api/v1/jobs/{job.pk}/failures").status_code == 404
