"""A long files poll reads a job with a page open between its slices.

With a thousand running jobs a files poll takes seconds; a researcher watching one job
would wait a whole poll for each line (bench/soak.py: the watched log's p95 3.0 s). The
poll goes a slice at a time, the watched jobs first, and reads them again, logs and
metrics only, before each later slice. The watchers here record what each read asked
for; the agent call over SSH is left out (what is tested is which attempts each read
takes, in which order, with which watchers).
"""

from dataclasses import dataclass, field

import pytest

from clusters.agent import AgentReply, FileRead, ListingRead
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll import cycle as polling
from jobs.poll import pipeline
from jobs.poll.open_pages import page_close, page_open
from tests import factories

pytestmark = pytest.mark.django_db


@dataclass
class Recorder:
    name: str
    reads: list[tuple[str, list[int]]] = field(default_factory=list)

    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        return [], []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        self.reads.append((self.name, [a.pk for a in attempts]))
        return set()


@pytest.fixture
def recorded(monkeypatch) -> list[tuple[str, list[int]]]:
    """Every watcher's reads, in order: ("all", ids) for a full read, ("page", ids) else."""
    reads: list[tuple[str, list[int]]] = []
    full, page = Recorder("all", reads), Recorder("page", reads)
    monkeypatch.setattr(
        pipeline, "_registered", pipeline.Pipeline(watchers=(full,), page_watchers=(page,))
    )
    monkeypatch.setattr(polling, "FILES_SLICE", 2)
    monkeypatch.setattr(polling, "_ask", lambda *args, **kwargs: AgentReply(time=0.0, files={}))
    return reads


def _running(project, member, count: int) -> list[Attempt]:
    cluster = factories.cluster("slices")
    account = factories.account(cluster, member)
    attempts = []
    for _ in range(count):
        _, attempt = factories.job(project, member, cluster)
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.RUNNING, account=account, slurm_job_id=str(attempt.pk)
        )
        attempts.append(attempt)
    return attempts


def test_a_watched_job_is_read_first_and_again_before_every_later_slice(
    project, member, recorded
) -> None:
    a1, a2, a3, a4, a5 = _running(project, member, 5)
    page_open(job_id=a4.job_id, channel="page-of-a4")
    try:
        polling.cluster_poll(cluster_id=a1.job.cluster_id, parts=(polling.FILES,))
    finally:
        page_close(job_id=a4.job_id, channel="page-of-a4")
    assert recorded == [
        ("all", [a4.pk, a1.pk]),
        ("page", [a4.pk]),
        ("all", [a2.pk, a3.pk]),
        ("page", [a4.pk]),
        ("all", [a5.pk]),
    ]


def test_without_a_page_open_or_in_one_slice_each_attempt_is_read_once(
    project, member, recorded
) -> None:
    attempts = _running(project, member, 3)
    polling.cluster_poll(cluster_id=attempts[0].job.cluster_id, parts=(polling.FILES,))
    assert recorded == [("all", [attempts[0].pk, attempts[1].pk]), ("all", [attempts[2].pk])]

    recorded.clear()
    Attempt.objects.filter(pk=attempts[2].pk).update(state=State.COMPLETED, files_complete=True)
    page_open(job_id=attempts[0].job_id, channel="page-of-a1")
    try:
        polling.cluster_poll(cluster_id=attempts[0].job.cluster_id, parts=(polling.FILES,))
    finally:
        page_close(job_id=attempts[0].job_id, channel="page-of-a1")
    assert recorded == [("all", [attempts[0].pk, attempts[1].pk])]  # one slice: no extra read


def test_an_ended_watched_job_is_read_to_its_end_once_a_poll(project, member, recorded) -> None:
    a1, a2, a3 = _running(project, member, 3)
    Attempt.objects.filter(pk=a3.pk).update(state=State.COMPLETED)  # output still unread
    page_open(job_id=a3.job_id, channel="page-of-a3")
    try:
        polling.cluster_poll(cluster_id=a1.job.cluster_id, parts=(polling.FILES,))
    finally:
        page_close(job_id=a3.job_id, channel="page-of-a3")
    assert recorded == [("all", [a1.pk, a2.pk]), ("all", [a3.pk])]
    assert Attempt.objects.get(pk=a3.pk).files_complete
