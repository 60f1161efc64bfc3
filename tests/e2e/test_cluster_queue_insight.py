"""The cluster page's queue on the sandbox: Slurm's real pending reasons, in plain words.

A blocker (alice's own job, not the portal's) holds every GPU of the sandbox; two jobs
named as the portal names its attempts queue behind it. The poll stores the reason the
portal account's squeue gives each: Resources or Priority (which one depends on the
scheduler's pass: both were seen for the first); the cluster page shows each in plain
words, Slurm's code in the tooltip, and lists the blocker nowhere (it is no portal job).
"""

import html
import shlex

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.cycle import cluster_poll
from jobs.queue.reasons import explain_reason
from tests import factories
from tests.helpers import hold_every_gpu, sbatch, wait_for

pytestmark = pytest.mark.sandbox

SCHEDULED = {"Resources", "Priority"}


# Alone on the sandbox: its blocker must get every GPU at once.
@pytest.mark.sandbox_exclusive
def test_jobs_behind_one_holding_every_gpu_show_slurms_reason_in_plain_words(
    researcher, project, sandbox_cluster: Cluster, alice: Connection, client: Client
) -> None:
    blocker_id = hold_every_gpu(alice, minutes=2, seconds=110)
    account = ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice")
    waiting: list[tuple[Attempt, str]] = []
    try:
        for name, nodes, gpus in (("wide", 2, 2), ("narrow", 1, 1)):
            _, attempt = factories.job(
                project, researcher, sandbox_cluster, name=name, state=State.PENDING,
                nodes=nodes, gpus_per_node=gpus,
            )  # fmt: skip
            slurm_id = sbatch(
                alice,
                f"--nodes={nodes} --ntasks-per-node=1 --gres=gpu:{gpus} --time=1 "
                f"--job-name={shlex.quote(attempt.slurm_job_name)} --wrap 'sleep 1'",
            )
            Attempt.objects.filter(pk=attempt.pk).update(
                state=State.PENDING, slurm_job_id=slurm_id, submitted_at=timezone.now(),
                account=account,
            )  # fmt: skip
            waiting.append((attempt, slurm_id))

        def reasons_read() -> bool:
            cluster_poll(cluster_id=sandbox_cluster.pk)
            for attempt, _ in waiting:
                attempt.refresh_from_db()
            return all(a.slurm_reason in SCHEDULED for a, _ in waiting)

        wait_for(reasons_read, 90, "Slurm to give both pending jobs a scheduling reason")

        client.force_login(researcher)
        page = client.get(reverse("cluster-page", args=[sandbox_cluster.name])).content.decode()
        pending = page[page.index('id="pending-table"') :]
        pending = pending[: pending.index("</table>")]
        for attempt, slurm_id in waiting:
            start = pending.index(f'<tr data-job="{attempt.job_id}">')
            row = pending[start : pending.index("</tr>", start)]
            reason = explain_reason(attempt.slurm_reason)
            assert slurm_id in row
            assert html.escape(reason.words) in row
            assert f'title="Slurm\'s reason: {attempt.slurm_reason}"' in row
        assert "blocker" not in page
    finally:
        ids = " ".join(shlex.quote(i) for i in [blocker_id, *(s for _, s in waiting)])
        alice.run(f"scancel {ids}")
