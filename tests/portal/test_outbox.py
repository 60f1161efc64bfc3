"""A local run's mail is kept as files and shown to the people it was sent to (issue 34,
point 5): `make run` has no mail server, and the console backend printed mail where no
user of the portal saw it."""

import stat
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core import mail
from django.test import Client

from jobs.notifications import job_end_send
from portal.settings.local_files import ensure_dotenv
from tests import factories

BACKEND = "portal_lib.outbox.OutboxBackend"


@pytest.fixture
def outbox(settings, tmp_path: Path) -> Path:
    settings.EMAIL_BACKEND = BACKEND
    settings.OUTBOX_DIR = str(tmp_path / "outbox")
    return tmp_path / "outbox"


def _page(user: User) -> str:
    client = Client()
    client.force_login(user)
    response = client.get("/mail/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.django_db
def test_each_message_is_a_private_file(outbox: Path) -> None:
    sent = mail.send_mail("one", "body one", "portal@localhost", ["a@example.org"])
    sent += mail.send_mail("two", "body two", "portal@localhost", ["b@example.org"])
    assert sent == 2
    files = sorted(outbox.iterdir())
    assert len(files) == 2 and all(f.suffix == ".eml" for f in files)
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert stat.S_IMODE(outbox.stat().st_mode) == 0o700
    assert b"Subject: one" in files[0].read_bytes()


@pytest.mark.django_db
def test_a_job_end_mail_reaches_its_submitter_page_and_no_one_elses(
    outbox: Path, project, member: User, cluster, staff: User
) -> None:
    member.email = "member@example.org"
    member.save()
    other = User.objects.create_user("mallory", email="mallory@example.org")
    job, attempt = factories.job(project, member, cluster)
    assert job_end_send(attempt_id=attempt.pk) == 1
    mine = _page(member)
    assert f"Job {job.name} (#{job.pk})" in mine and "member@example.org" in mine
    assert f"Job {job.name} (#{job.pk})" not in _page(other)
    assert f"Job {job.name} (#{job.pk})" in _page(staff)  # staff see it all


@pytest.mark.django_db
def test_the_outbox_is_off_without_its_folder_and_refuses_the_signed_out(
    settings, member: User
) -> None:
    settings.OUTBOX_DIR = ""
    client = Client()
    assert client.get("/mail/").status_code == 302  # to the log-in page
    client.force_login(member)
    assert client.get("/mail/").status_code == 404
    assert 'href="/mail/"' not in client.get("/").content.decode()


@pytest.mark.django_db
def test_the_menu_links_the_outbox_when_it_is_on(outbox: Path, member: User) -> None:
    client = Client()
    client.force_login(member)
    assert 'href="/mail/"' in client.get("/").content.decode()


def test_a_local_run_gets_a_metrics_token_once_even_with_an_older_env_file(
    tmp_path: Path,
) -> None:
    dotenv = tmp_path / ".env"
    dotenv.write_text("DJANGO_SECRET_KEY=kept\n")
    ensure_dotenv(dotenv)
    ensure_dotenv(dotenv)
    lines = dotenv.read_text().splitlines()
    assert lines[0] == "DJANGO_SECRET_KEY=kept"
    tokens = [line for line in lines if line.startswith("PORTAL_METRICS_TOKEN=")]
    assert len(tokens) == 1 and len(tokens[0].partition("=")[2]) >= 24
