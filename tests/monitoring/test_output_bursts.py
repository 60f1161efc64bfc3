"""A running job whose stdout arrives in blocks (buffered) is told so on its page, with the fix;
one that prints as it goes is not."""

from django.contrib.auth.models import User
from django.test import Client

from jobs.models import Attempt
from monitoring.models import AttemptIngest, LogFile
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

# Trainer dicts as Python writes them into a file: an 8 KiB buffer at a time.
RECORD = (
    b"{'loss': '3.912', 'grad_norm': '0.9006', 'learning_rate': '0.0004833', 'epoch': '0.1667'}\n"
)
BLOCK = (RECORD * (8192 // len(RECORD) + 1))[:8192]


def _poll(attempt: Attempt, data: bytes) -> None:
    ingest([attempt], reply_with({attempt: {"stdout.log": data}}))


def _bursts(attempt: Attempt) -> bool:
    return AttemptIngest.objects.filter(attempt=attempt, output_in_bursts=True).exists()


def test_buffered_output_is_named_on_the_page(
    project: Project, member: User, client: Client
) -> None:
    attempt = running(factories.job(project, member, factories.cluster())[1])
    for data in (BLOCK, b"", b"", BLOCK, b"", BLOCK):
        _poll(attempt, data)
    assert _bursts(attempt)
    client.force_login(member)
    page = client.get(f"/jobs/{attempt.job_id}/").content.decode()
    assert "output arrives in bursts" in page
    assert "python -u" in page


def test_output_written_as_it_goes_is_no_burst_and_idle_polls_write_nothing(
    project: Project, member: User, client: Client
) -> None:
    attempt = running(factories.job(project, member, factories.cluster())[1])
    for step in range(1, 8):
        _poll(attempt, f"step {step} loss {2.0 / step:.4f} lr 0.0500\n".encode())
    _poll(attempt, b"")
    growth = LogFile.objects.get(attempt=attempt, name="stdout.log").growth
    for _ in range(3):  # silent again: the counters stay as they are
        _poll(attempt, b"")
    assert LogFile.objects.get(attempt=attempt, name="stdout.log").growth == growth
    assert growth["grown"] == 7 and growth["silent"] is True
    assert not _bursts(attempt)
    client.force_login(member)
    assert "output arrives in bursts" not in client.get(f"/jobs/{attempt.job_id}/").content.decode()
