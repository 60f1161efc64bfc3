"""Slurm's pending reason on the job page, from the poll the portal account already does.

A real held job on the sandbox (`sbatch --hold` as alice, named as the portal names
its jobs): the portal account's squeue says JobHeldUser, the attempt keeps it, the
page shows it next to the state with the Slurm job id; once released and running,
the reason is gone.
"""

import shlex

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from clusters.ssh import Connection
from jobs.models import Attempt, State
from jobs.polling import cluster_poll
from tests import factories
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox


def test_a_held_job_shows_slurms_reason_then_loses_it_when_it_runs(
    researcher, project, sandbox_cluster: Cluster, alice: Connection, client: Client
) -> None:
    job, attempt = factories.job(project, researcher, sandbox_cluster, state=State.PENDING)
    submitted = alice.run(
        f"sbatch --parsable --hold --job-name={shlex.quote(attempt.slurm_job_name)} "
        "--time=2 --wrap 'sleep 60'"
    )
    assert submitted.exit_status == 0, submitted.text
    slurm_id = submitted.text.strip().split(";")[0]
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING,
        slurm_job_id=slurm_id,
        submitted_at=timezone.now(),
        account=ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice"),
    )
    try:
        cluster_poll(cluster_id=sandbox_cluster.pk)
        attempt.refresh_from_db()
        assert (attempt.state, attempt.slurm_reason) == (State.PENDING, "JobHeldUser")
        client.force_login(researcher)
        page = client.get(reverse("job-page", args=[job.pk])).content.decode()
        facts = page[page.index('id="job-facts"') : page.index("</dl>")]
        assert slurm_id in facts and "(JobHeldUser)" in facts

        assert alice.run(f"scontrol release {shlex.quote(slurm_id)}").exit_status == 0

        def running() -> bool:
            cluster_poll(cluster_id=sandbox_cluster.pk)
            attempt.refresh_from_db()
            return attempt.state == State.RUNNING

        wait_for(running, QUEUE_WAIT, "the released job to run")
        assert attempt.slurm_reason == ""
        page = client.get(reverse("job-page", args=[job.pk])).content.decode()
        assert 'id="fact-reason"' not in page
    finally:
        alice.run(f"scancel {shlex.quote(slurm_id)}")
