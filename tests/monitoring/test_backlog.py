"""A file far behind drains in a few polls, and a finished job is complete only once read.

The polls run the real agent script on files in a temporary directory; only the SSH
hop is replaced, by a local shell (as in tests/clusters/test_agent_client.py).
"""

import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

from clusters.ssh import Endpoint
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll import cycle as polling
from jobs.rundir import STDOUT_FILE
from monitoring.logs.store import MAX_CHUNK_BYTES, READ_BYTES, READ_BYTES_MAX, log_read
from monitoring.models import LogChunk, LogFile
from projects.models import Project
from tests import factories
from tests.clusters.test_agent_client import LocalShell

MIB = 1024 * 1024


class LocalPool:
    """Stands in for the SSH pool: every session is a local shell in the run's directory."""

    def __init__(self, home: Path) -> None:
        self.shell = LocalShell(home)

    @contextlib.contextmanager
    def session(self, endpoint: Endpoint) -> Iterator[LocalShell]:
        yield self.shell


def burst(path: Path, size: int) -> bytes:
    """`size` bytes of numbered lines, as a job printing fast writes them."""
    lines = b"".join(b"line %08d of a burst of output\n" % i for i in range(size // 32 + 1))
    path.write_bytes(lines[:size])
    return lines[:size]


@pytest.fixture
def finished(project: Project, member: User, tmp_path: Path, monkeypatch: Any) -> Attempt:
    cluster = factories.cluster()
    _, attempt = factories.job(project, member, cluster)
    Attempt.objects.filter(pk=attempt.pk).update(
        account=factories.account(cluster, member),
        run_dir=str(tmp_path),
        state=State.COMPLETED,
        slurm_job_id="41",
    )
    monkeypatch.setattr(polling, "pool", LocalPool(tmp_path))
    return attempt


def test_a_finished_job_is_complete_only_once_its_burst_is_read(
    finished: Attempt, tmp_path: Path
) -> None:
    size = 20 * MIB
    written = burst(tmp_path / STDOUT_FILE, size)
    stored_sizes = []
    for _ in range(size // READ_BYTES):  # what the old 1 MiB per poll would have taken
        polling.cluster_poll(cluster_id=finished.job.cluster_id)
        log_file = LogFile.objects.get(attempt=finished, name=STDOUT_FILE)
        stored_sizes.append(log_file.size)
        complete = Attempt.objects.get(pk=finished.pk).files_complete
        # Shown finished (complete) exactly when every byte is stored, never before.
        assert complete == (log_file.size == size)
        if complete:
            break
    # The first poll learns how far behind the file is; the next ones take up to the ceiling.
    assert len(stored_sizes) == 1 + math.ceil((size - READ_BYTES) / READ_BYTES_MAX)
    assert stored_sizes[:2] == [READ_BYTES, READ_BYTES + READ_BYTES_MAX]
    assert log_read(attempt_id=finished.pk, file=STDOUT_FILE, offset=0, limit=size).data == written
    sizes = [len(data) for data in LogChunk.objects.values_list("data", flat=True)]
    assert max(sizes) == MAX_CHUNK_BYTES and sum(sizes) == size


def test_a_file_that_keeps_up_is_read_a_little_at_a_time(finished: Attempt, tmp_path: Path) -> None:
    Attempt.objects.filter(pk=finished.pk).update(state=State.RUNNING)
    path = tmp_path / STDOUT_FILE
    written = burst(path, 100)
    polling.cluster_poll(cluster_id=finished.job.cluster_id)
    with path.open("ab") as out:
        out.write(b"one more line\n")
    written += b"one more line\n"
    polling.cluster_poll(cluster_id=finished.job.cluster_id)
    assert log_read(attempt_id=finished.pk, file=STDOUT_FILE, offset=0, limit=MIB).data == written
    assert not Attempt.objects.get(pk=finished.pk).files_complete  # still running
