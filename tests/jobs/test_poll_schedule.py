"""Which clusters the beat polls: live attempts, and ended ones whose output is still unread."""

import pytest

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt
from jobs.selectors import clusters_to_poll
from tests import factories

pytestmark = pytest.mark.django_db


def _attempt(project, member, **fields: object) -> Attempt:
    cluster = factories.cluster(f"c{Cluster.objects.count()}")  # one cluster per attempt
    _, attempt = factories.job(project, member, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(**fields)
    return Attempt.objects.select_related("job__cluster").get(pk=attempt.pk)


def test_an_ended_job_with_output_left_keeps_its_cluster_polled(project, member) -> None:
    running = _attempt(project, member, state=State.RUNNING, slurm_job_id="1")
    # A burst at the end: the job ended, the polls have not read it all yet.
    draining = _attempt(project, member, state=State.COMPLETED, slurm_job_id="2")
    read = _attempt(project, member, state=State.COMPLETED, slurm_job_id="3", files_complete=True)
    never_ran = _attempt(project, member, state=State.CANCELLED)
    queued = _attempt(project, member, state=State.QUEUED)
    polled = set(clusters_to_poll())
    assert running.job.cluster in polled and draining.job.cluster in polled
    assert not {read.job.cluster, never_ran.job.cluster, queued.job.cluster} & polled
    # Read to the end: polling that cluster stops.
    Attempt.objects.filter(pk=draining.pk).update(files_complete=True)
    assert draining.job.cluster not in set(clusters_to_poll())


def test_an_inactive_cluster_is_not_polled(project, member) -> None:
    running = _attempt(project, member, state=State.RUNNING, slurm_job_id="1")
    Cluster.objects.filter(pk=running.job.cluster_id).update(is_active=False)
    assert not clusters_to_poll().exists()
