"""A poll costs one SSH command per cluster account, plus one squeue as the portal account,
whatever the number of live jobs."""

import pytest

from clusters.models import ClusterAccount
from clusters.ssh import stats
from devtools import held_jobs
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.cycle import cluster_poll
from tests.helpers import slurm_name

pytestmark = pytest.mark.sandbox


def test_two_hundred_live_jobs_cost_two_commands(
    researcher, project, sandbox_cluster, alice
) -> None:
    # The session's Celery worker polls active clusters too; keep it off this one.
    sandbox_cluster.is_active = False
    sandbox_cluster.save(update_fields=["is_active"])
    account = ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice")
    attempts = held_jobs.register(
        project=project, user=researcher, cluster=sandbox_cluster, account=account, count=200
    )
    slurm_ids = held_jobs.submit_held(alice, attempts, slurm_name("cost"))
    try:
        cluster_poll(cluster_id=sandbox_cluster.pk)  # connects once per account
        stats.reset()
        result = cluster_poll(cluster_id=sandbox_cluster.pk)
        assert stats.commands == 2  # the portal account's squeue, alice's agent
        assert stats.connects == 0 and stats.uploads == 0
        assert result.attempts == 200
        states = set(
            Attempt.objects.filter(pk__in=[a.pk for a in attempts]).values_list("state", flat=True)
        )
        assert states == {State.PENDING}

        alice.run(f"scancel {' '.join(slurm_ids[:50])}")
        stats.reset()
        result = cluster_poll(cluster_id=sandbox_cluster.pk)
        assert stats.commands == 2  # cancelled jobs are still in squeue (MinJobAge)
        assert result.changed == 50
        cancelled = Attempt.objects.filter(state=State.CANCELLED).count()
        assert cancelled == 50
        # An ended job's files are read once more after the poll that saw it end; then
        # finished jobs are not polled again.
        cluster_poll(cluster_id=sandbox_cluster.pk)
        stats.reset()
        assert cluster_poll(cluster_id=sandbox_cluster.pk).attempts == 150
    finally:
        alice.run(f"scancel {' '.join(slurm_ids)}", timeout=60)
