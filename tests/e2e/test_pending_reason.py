"""Slurm's pending reason on the job page, from the poll the portal account already does.

A real held job on the sandbox (`sbatch --hold` as alice, named as the portal names
its jobs): the portal account's squeue says JobHeldUser, the attempt keeps it, the
page shows it next to the state with the Slurm job id; once released and running,
the reason is gone.

A job pending on Resources behind one that holds every GPU gets Slurm's own start
estimate (the backfill scheduler's, squeue StartTime): the page shows it.
"""

import shlex
from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from clusters.selectors import portal_endpoint
from clusters.slurm import Slurm
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.cycle import cluster_poll
from jobs.queue.start_estimates import ESTIMATE_KEY
from jobs.slurm_states import portal_state
from tests import factories
from tests.helpers import QUEUE_WAIT, hold_every_gpu, sbatch, wait_for

pytestmark = pytest.mark.sandbox


def test_a_held_job_shows_slurms_reason_then_loses_it_when_it_runs(
    researcher, project, sandbox_cluster: Cluster, alice: Connection, client: Client
) -> None:
    job, attempt = factories.job(project, researcher, sandbox_cluster, state=State.PENDING)
    slurm_id = sbatch(
        alice,
        f"--hold --job-name={shlex.quote(attempt.slurm_job_name)} --time=2 --wrap 'sleep 60'",
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING,
        slurm_job_id=slurm_id,
        submitted_at=timezone.now(),
        account=ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice"),
    )
    try:
        cache.delete(ESTIMATE_KEY.format(cluster_id=sandbox_cluster.pk))
        cluster_poll(cluster_id=sandbox_cluster.pk)
        attempt.refresh_from_db()
        assert (attempt.state, attempt.slurm_reason) == (State.PENDING, "JobHeldUser")
        client.force_login(researcher)
        page = client.get(reverse("job-page", args=[job.pk])).content.decode()
        facts = page[page.index('id="job-facts"') : page.index("</dl>")]
        assert slurm_id in facts and "(JobHeldUser)" in facts
        # A held job is not scheduled: Slurm gives it no start time (squeue prints N/A).
        assert attempt.expected_start_at is None
        assert (
            "no estimate yet" in facts
            and "similar jobs (1 node x 1 GPU on the default partition)" in facts
        )

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


# Alone on the sandbox: its blocker must get every GPU at once, and while it holds them
# no other test's job could start.
@pytest.mark.sandbox_exclusive
def test_a_job_behind_one_holding_every_gpu_shows_slurms_start_estimate(
    researcher, project, sandbox_cluster: Cluster, alice: Connection, client: Client
) -> None:
    blocker_id = hold_every_gpu(alice, minutes=3, seconds=170)
    job, attempt = factories.job(
        project, researcher, sandbox_cluster, state=State.PENDING, nodes=2, gpus_per_node=2
    )
    slurm_id = sbatch(
        alice,
        "--nodes=2 --ntasks-per-node=1 --gres=gpu:2 --time=2 "
        f"--job-name={shlex.quote(attempt.slurm_job_name)} --wrap 'sleep 1'",
    )
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.PENDING,
        slurm_job_id=slurm_id,
        submitted_at=timezone.now(),
        account=ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice"),
    )
    key = ESTIMATE_KEY.format(cluster_id=sandbox_cluster.pk)
    try:

        def estimated() -> bool:
            cache.delete(key)  # the test does not wait QUEUE_ESTIMATE_INTERVAL
            cluster_poll(cluster_id=sandbox_cluster.pk)
            attempt.refresh_from_db()
            return attempt.expected_start_at is not None or attempt.state != State.PENDING

        wait_for(estimated, 120, "Slurm's backfill scheduler to estimate the job's start")
        assert attempt.state == State.PENDING, attempt.reason
        endpoint = portal_endpoint(cluster=sandbox_cluster)
        assert endpoint is not None
        with Connection(endpoint) as portal:
            (row,) = Slurm(portal, tools=sandbox_cluster.slurm_tools).queue([blocker_id])
        assert portal_state(row.state) == State.RUNNING and row.start_time and row.time_limit
        # Slurm places it when the blocker's time limit runs out, at the latest.
        estimate = attempt.expected_start_at
        submitted_at = attempt.submitted_at
        assert estimate is not None and submitted_at is not None
        assert submitted_at - timedelta(seconds=5) < estimate
        assert estimate <= row.start_time + row.time_limit + timedelta(seconds=5)
        client.force_login(researcher)
        page = client.get(reverse("job-page", args=[job.pk])).content.decode()
        facts = page[page.index('id="job-facts"') : page.index("</dl>")]
        # Slurm's own, or corrected by a history of its estimates (jobs.queue.accuracy).
        shown = ("(Slurm&#x27;s own, uncorrected: ", "; corrected from ", "no newer estimate yet")
        assert any(words in facts for words in shown), facts
        assert "similar jobs (2 nodes x 2 GPUs on the default partition)" in facts
    finally:
        alice.run(f"scancel {shlex.quote(slurm_id)} {shlex.quote(blocker_id)}")
