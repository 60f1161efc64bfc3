"""Which GPU sampler files an attempt's notice counts as ignored.

13 of 15 job pages said "1 GPU file ignored" while every GPU file was charted: the files
poll (its own task, apart from the state poll) listed a new job's run directory before the
state poll had recorded the job's nodes, so the job's own `gpu-<node>.csv` looked like
another node's and was counted, and the count never went down.
"""

import pytest
from django.test import Client

from jobs.enums import State
from jobs.models import Attempt
from monitoring.models import AttemptIngest, LogFile
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

pytestmark = pytest.mark.django_db


def _started_unplaced(attempt: Attempt) -> Attempt:
    """Running on the cluster, as the files poll sees it before the state poll says where."""
    Attempt.objects.filter(pk=attempt.pk).update(
        run_dir=f"/runs/{attempt.uuid}", state=State.PENDING, node_list=""
    )
    return Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk)


def _dropped(attempt: Attempt) -> int:
    note = AttemptIngest.objects.filter(attempt=attempt).first()
    return note.dropped_gpu_files if note is not None else 0


def test_own_file_listed_before_the_nodes_are_known_is_not_ignored(
    project, owner, cluster, client: Client
) -> None:
    job, attempt = factories.job(project, owner, cluster, nodes=1, gpus_per_node=2)
    listing: dict[str, list[str]] = {"gpu-n1.csv": [], "gpu-sampler.log": [], "stdout.log": []}
    ingest([_started_unplaced(attempt)], reply_with({}, listings={attempt: list(listing)}))
    assert _dropped(attempt) == 0
    # The state poll records the node; the next files poll follows the file.
    placed = running(attempt, nodes="n1")
    ingest([placed], reply_with({}, listings={placed: list(listing)}))
    assert LogFile.objects.filter(attempt=attempt, name="gpu-n1.csv").exists()
    assert _dropped(attempt) == 0
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "GPU file" not in page


def test_another_nodes_file_is_counted_once_the_nodes_are_known(project, owner, cluster) -> None:
    _, attempt = factories.job(project, owner, cluster, nodes=2, gpus_per_node=2)
    names = ["gpu-n1.csv", "gpu-n2.csv", "gpu-elsewhere.csv"]
    ingest([_started_unplaced(attempt)], reply_with({}, listings={attempt: names}))
    assert _dropped(attempt) == 0
    placed = running(attempt, nodes="n[1-2]")
    ingest([placed], reply_with({}, listings={placed: names}))
    followed = set(LogFile.objects.filter(attempt=attempt).values_list("name", flat=True))
    assert {"gpu-n1.csv", "gpu-n2.csv"} <= followed and "gpu-elsewhere.csv" not in followed
    assert _dropped(attempt) == 1
