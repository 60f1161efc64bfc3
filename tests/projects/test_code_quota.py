"""A project's code storage quota (issue 33, point 4): an archive that does not fit is
refused before it is kept, naming the quota, the usage and what to do; the project page
and the admin's project list show the bytes kept of the quota.

Before: every upload (up to 100 MiB each) was kept with no cap per project.
"""

import io
import subprocess
import tarfile
import threading
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection
from django.test import Client

from jobs.code.snapshots import code_inputs, snapshot_path, snapshot_store
from jobs.enums import State
from jobs.models import Attempt, CodeSnapshot
from jobs.submission import attempt_submit
from portal_lib.errors import PortalError
from projects.models import Membership, Project
from projects.storage import MIB, CodeStorage, fmt_bytes
from tests import factories
from tests.helpers import Tokens, bearer

UPLOAD = "/api/v1/projects/vision/code/"

pytestmark = pytest.mark.usefixtures("snapshot_dir")


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    return settings.CODE_SNAPSHOT_DIR


def _tar(name: str, data: bytes) -> bytes:
    """An uncompressed tar: its size on disk is what the quota counts."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


FIRST = _tar("train.py", b"print('first')\n")
SECOND = _tar("eval.py", b"print('second')\n")


def _upload(client: Client, data: bytes):
    return client.post(UPLOAD, {"archive": SimpleUploadedFile("code.tar", data)})


def _kept(snapshot_dir: Path) -> list[Path]:
    return sorted(p for p in Path(snapshot_dir).rglob("*") if p.is_file())


def test_an_archive_past_the_quota_is_refused_naming_quota_usage_and_what_to_do(
    settings, tokens: Tokens, project: Project, snapshot_dir: Path
) -> None:
    settings.CODE_QUOTA_BYTES = len(FIRST) + len(SECOND) - 1
    assert _upload(bearer(tokens.member), FIRST).status_code == 201

    refused = _upload(bearer(tokens.member), SECOND)

    assert refused.status_code == 400, refused.content
    message = refused.json()["archive"][0]
    used, quota = fmt_bytes(len(FIRST)), fmt_bytes(settings.CODE_QUOTA_BYTES)
    assert message.startswith(
        f"Project vision keeps {used} of code snapshots of its {quota} quota; this archive "
        f"({fmt_bytes(len(SECOND))}) does not fit in the {fmt_bytes(len(SECOND) - 1)} left."
    )
    # What the project keeps unused: when it goes, how to delete it now; what to leave out,
    # whom to ask.
    kept = CodeSnapshot.objects.get().sha256
    assert (
        f"1 of its snapshots ({used}) no job or sweep uses go 7 days after their last use, "
        f"or at once with DELETE /api/v1/projects/vision/code/<sha256>/ (the largest: {kept} "
        f"({used}))." in message
    )
    assert "Leave data and checkpoints out of the archive" in message
    assert "ask an administrator to raise the project's code storage quota" in message
    # Nothing of the refused archive is kept: no row, no file, no temporary left over.
    assert list(CodeSnapshot.objects.values_list("size", flat=True)) == [len(FIRST)]
    assert _kept(snapshot_dir) == [snapshot_path(CodeSnapshot.objects.get().sha256)]


def test_bytes_the_project_has_already_are_never_refused(
    settings, tokens: Tokens, project: Project
) -> None:
    settings.CODE_QUOTA_BYTES = len(FIRST)
    assert _upload(bearer(tokens.member), FIRST).status_code == 201
    again = _upload(bearer(tokens.member), FIRST)  # the quota is full, but nothing is added
    assert again.status_code == 200, again.content
    assert _upload(bearer(tokens.member), SECOND).status_code == 400


def test_the_projects_own_quota_overrides_the_site_default(
    settings, tokens: Tokens, project: Project
) -> None:
    settings.CODE_QUOTA_BYTES = 0
    assert _upload(bearer(tokens.member), FIRST).status_code == 400
    project.code_quota_mib = 1
    project.save()
    assert _upload(bearer(tokens.member), FIRST).status_code == 201


def test_each_project_counts_the_bytes_it_keeps_even_where_another_has_them(
    settings, member: User, project: Project
) -> None:
    """The file is shared, the charge is not: one project's quota never depends on another's."""
    other = Project.objects.create(slug="speech", name="Speech")
    Membership.objects.create(user=member, project=other, role=Membership.Role.MEMBER)
    snapshot_store(user=member, project=project, chunks=[FIRST])
    settings.CODE_QUOTA_BYTES = len(FIRST) - 1
    with pytest.raises(PortalError, match="Project speech keeps 0 B of code snapshots"):
        snapshot_store(user=member, project=other, chunks=[FIRST])


def test_the_job_form_shows_the_refusal_under_its_archive_field(
    settings, member: User, project: Project
) -> None:
    settings.CODE_QUOTA_BYTES = len(FIRST) - 1
    archive = SimpleUploadedFile("code.tar", FIRST)
    with pytest.raises(PortalError) as refused:
        code_inputs(user=member, project=project, archive=archive, code_from=None)
    assert "does not fit" in refused.value.errors["archive"][0]
    assert not CodeSnapshot.objects.exists()


def test_a_git_fetch_past_the_quota_fails_its_job_with_the_same_words(
    settings, tmp_path: Path, member: User, project: Project
) -> None:
    """The quota holds for code the portal fetches too; the job says why it did not start."""
    repo = tmp_path / "origin"
    repo.mkdir()
    (repo / "train.py").write_text("print('from git')\n")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-qm", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@x", "-C", str(repo), *args],
            check=True,
            capture_output=True,
        )
    settings.CODE_GIT_ALLOW_LOCAL = True  # file:// stands in for an https server here
    settings.CODE_QUOTA_BYTES = 100
    cluster = factories.cluster()
    _, attempt = factories.job(project, member, cluster, code_git_url=f"file://{repo}")

    attempt_submit(attempt_id=attempt.pk)

    attempt = Attempt.objects.get(pk=attempt.pk)
    assert attempt.state == State.FAILED
    assert attempt.reason.startswith("Project vision keeps 0 B of code snapshots of its 100 B")
    assert not CodeSnapshot.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_parallel_uploads_that_fit_alone_do_not_pass_the_quota_together(
    settings, member: User, project: Project
) -> None:
    """Each checks the room left under its project's lock: the second sees the first."""
    settings.CODE_QUOTA_BYTES = len(FIRST) + len(SECOND) - 1
    start = threading.Barrier(2)
    outcomes: list[str] = []

    def upload(data: bytes) -> None:
        try:
            start.wait()
            snapshot_store(user=member, project=project, chunks=[data])
            outcomes.append("kept")
        except PortalError:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=upload, args=(data,)) for data in (FIRST, SECOND)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(outcomes) == ["kept", "refused"]
    assert CodeSnapshot.objects.count() == 1


def test_the_project_page_shows_the_bytes_kept_of_the_quota(
    client: Client, member: User, project: Project
) -> None:
    project.code_quota_mib = 1
    project.save()
    for size, sha in ((300 * 1024, "a"), (212 * 1024, "b")):
        CodeSnapshot.objects.create(
            project=project, sha256=sha * 64, size=size, unpacked_size=size, files=1,
            created_by=member,
        )  # fmt: skip
    other = Project.objects.create(slug="speech", name="Speech")
    CodeSnapshot.objects.create(
        project=other, sha256="c" * 64, size=MIB, unpacked_size=MIB, files=1, created_by=member
    )
    client.force_login(member)
    page = client.get("/projects/vision/").content.decode()
    assert '<span class="value" id="code-storage-used">512.0 KiB of 1.0 MiB (50 %)</span>' in page
    assert '<span class="value" id="code-storage-left">512.0 KiB</span>' in page


def test_the_api_gives_each_project_its_code_storage(
    settings, tokens: Tokens, member: User, project: Project
) -> None:
    settings.CODE_QUOTA_BYTES = 1000
    CodeSnapshot.objects.create(
        project=project, sha256="a" * 64, size=300, unpacked_size=1, files=1, created_by=member
    )
    rows = bearer(tokens.member).get("/api/v1/projects/").json()
    assert rows[0]["code_storage"] == {"used": 300, "quota": 1000, "left": 700}


def test_the_admins_project_list_shows_each_projects_code_storage(
    client: Client, staff: User, member: User, project: Project, settings
) -> None:
    settings.CODE_QUOTA_BYTES = 2 * 1024 * MIB
    CodeSnapshot.objects.create(
        project=project, sha256="a" * 64, size=3 * MIB // 2, unpacked_size=1, files=1,
        created_by=member,
    )  # fmt: skip
    Project.objects.create(slug="speech", name="Speech", code_quota_mib=10)
    client.force_login(staff)
    listing = client.get("/admin/projects/project/").content.decode()
    assert '<td class="field-code_storage">1.5 MiB of 2.0 GiB (0 %)</td>' in listing
    assert '<td class="field-code_storage">0 B of 10.0 MiB (0 %)</td>' in listing
    form = client.get(f"/admin/projects/project/{project.pk}/change/").content.decode()
    assert 'name="code_quota_mib"' in form
    assert "1.5 MiB of 2.0 GiB (0 %)" in form


@pytest.mark.parametrize(
    ("size", "text"),
    [
        (0, "0 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (int(1.5 * MIB), "1.5 MiB"),
        (1024 * MIB, "1.0 GiB"),
        (5000 * 1024 * MIB, "5000.0 GiB"),
    ],
)
def test_sizes_read_in_binary_units(size: int, text: str) -> None:
    assert fmt_bytes(size) == text


def test_usage_past_a_lowered_quota_shows_as_over_it() -> None:
    over = CodeStorage(used=3 * MIB, quota=2 * MIB)
    assert (over.left, over.percent_used, over.fits(0)) == (0, 150, False)
    assert over.summary == "3.0 MiB of 2.0 MiB (150 %)"


def test_outsiders_see_no_project_page(client: Client, outsider: User, project: Project) -> None:
    client.force_login(outsider)
    assert client.get("/projects/vision/").status_code == 404
