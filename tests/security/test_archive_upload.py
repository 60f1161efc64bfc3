"""An upload cannot freeze the portal (issue 33, point 1), against the real daphne.

The pen test's 149 KB tar with a 150,000-digit pax header held its upload 12.5 s and
another user's login page 12.48 s: daphne is one process, and Python 3.11.7's tarfile
parses such a header with the GIL held (CVE-2024-6232). The header is now refused
unread, and the check runs in a child process: while an archive that costs the
vulnerable parser seconds is checked, another client's login page is answered.
"""

import threading
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth.models import User

from accounts.services import token_issue
from devtools.archives import finding_tar, slow_pax_tar
from jobs.code.checker import UNPACKER
from jobs.models import CodeSnapshot
from projects.models import Project
from tests.helpers import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

# Generous on a busy machine; the outcome is the order of the answers, not their times.
TIMEOUT = 120


def _upload(server: str, token: str, project: Project, data: bytes) -> httpx.Response:
    return httpx.post(
        f"{server}/api/v1/projects/{project.slug}/code/",
        headers={"Authorization": f"Bearer {token}"},
        files={"archive": ("code.tar", data)},
        timeout=TIMEOUT,
    )


def _cmdline(pid: str) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")


def _parent(pid: str) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split()[1] for line in status.splitlines() if line.startswith("PPid:"))


def _checking(server: str) -> bool:
    """Whether the server's process has an archive check running in a child of its own."""
    port = str(urlsplit(server).port)
    for proc in Path("/proc").iterdir():
        try:
            checker = proc.name.isdigit() and str(UNPACKER) in _cmdline(proc.name)
            if checker and port in _cmdline(_parent(proc.name)):
                return True
        except OSError:
            continue  # ended while we looked
    return False


@pytest.fixture
def token(member: User) -> str:
    return token_issue(user=member, name="uploads", scope="submit").text


def test_the_findings_archive_is_refused_with_the_limit(
    asgi_server: str, token: str, project: Project
) -> None:
    response = _upload(asgi_server, token, project, finding_tar())
    assert response.status_code == 400
    [message] = response.json()["archive"]
    assert "of 150000 bytes, over the limit of 16384 bytes (16 KiB) for one header" in message
    assert not CodeSnapshot.objects.exists()


def test_another_client_is_answered_while_an_archive_is_checked(
    asgi_server: str, token: str, project: Project
) -> None:
    # Every header is under the limit; together they cost a vulnerable tarfile seconds
    # with the GIL held, and the last member is refused once all were read.
    archive = slow_pax_tar(members=8, digits=16_000)
    answered: list[str] = []
    upload: list[httpx.Response] = []

    def send() -> None:
        upload.append(_upload(asgi_server, token, project, archive))
        answered.append("upload")

    sender = threading.Thread(target=send)
    sender.start()
    try:
        wait_for(lambda: _checking(asgi_server) or answered, TIMEOUT, "the archive check")
        login = httpx.get(f"{asgi_server}/login/", timeout=TIMEOUT)
        answered.append("login")
    finally:
        sender.join(TIMEOUT)
    assert login.status_code == 200
    assert answered == ["login", "upload"]
    assert upload[0].status_code == 400
    assert "'..' component" in upload[0].json()["archive"][0]
