"""Code through the pages: the form takes an archive (or a clone's snapshot), the job page
shows commit, branch and diff, and an unsafe archive is refused under its field."""

import io
import tarfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse

from devtools.archives import finding_tar
from jobs.models import CodeSnapshot, Job
from tests import factories
from tests.jobs.test_views import _form

pytestmark = pytest.mark.usefixtures("service_account", "snapshot_dir")


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    return settings.CODE_SNAPSHOT_DIR


def _tar(name: str, data: bytes = b"print('hi')\n") -> SimpleUploadedFile:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return SimpleUploadedFile("code.tar.gz", raw.getvalue())


def test_the_form_takes_an_archive_and_a_clone_runs_the_same_snapshot(
    client: Client, member, project, cluster, django_capture_on_commit_callbacks
) -> None:
    client.force_login(member)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            reverse("job-new"), _form(cluster, project, code_archive=_tar("train.py"))
        )
    assert response.status_code == 302, response.content.decode()[:2000]
    job = Job.objects.get()
    assert job.code is not None and job.code.files == 1

    page = client.get(reverse("job-new") + f"?clone={job.pk}").content.decode()
    assert f'name="code_from" value="{job.pk}"' in page
    assert f"Runs the code of job #{job.pk}" in page
    with django_capture_on_commit_callbacks(execute=False):
        client.post(reverse("job-new"), _form(cluster, project, name="again", code_from=job.pk))
    clone = Job.objects.get(name="again")
    assert clone.code_id == job.code_id and CodeSnapshot.objects.count() == 1


def test_an_unsafe_archive_is_refused_under_its_field(
    client: Client, member, project, cluster
) -> None:
    client.force_login(member)
    response = client.post(
        reverse("job-new"), _form(cluster, project, code_archive=_tar("../escape.py"))
    )
    assert response.status_code == 200
    assert "a &#x27;..&#x27; component would leave the directory" in response.content.decode()
    assert not Job.objects.exists() and not CodeSnapshot.objects.exists()


def test_the_job_page_shows_commit_branch_and_diff(
    client: Client, member, project, cluster
) -> None:
    snapshot = CodeSnapshot.objects.create(
        project=project, sha256="ab" * 32, size=10, unpacked_size=12, files=2, created_by=member
    )
    job, _ = factories.job(
        project,
        member,
        cluster,
        code=snapshot,
        code_commit="c" * 40,
        code_branch="feature/lr",
        code_diff="-lr = 0.1\n+lr = 0.3\n",
    )
    client.force_login(member)
    page = client.get(reverse("job-page", args=[job.pk])).content.decode()
    assert "abababababab" in page and "c" * 40 in page and "feature/lr" in page
    assert "+lr = 0.3" in page


def test_an_outsider_cannot_clone_anothers_code(
    client: Client, outsider, member, project, cluster
) -> None:
    snapshot = CodeSnapshot.objects.create(
        project=project, sha256="cd" * 32, size=10, unpacked_size=12, files=2, created_by=member
    )
    job, _ = factories.job(project, member, cluster, code=snapshot)
    client.force_login(outsider)
    assert client.get(reverse("job-page", args=[job.pk])).status_code == 404
    assert client.get(reverse("job-new") + f"?clone={job.pk}").status_code == 404


def test_the_form_takes_a_git_url_to_fetch_at_submission(
    client: Client, member, project, cluster, django_capture_on_commit_callbacks
) -> None:
    client.force_login(member)
    url = "https://git.example.org/vision/trainer.git"
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            reverse("job-new"), _form(cluster, project, code_git_url=url, code_git_ref="main")
        )
    assert response.status_code == 302
    job = Job.objects.get()
    assert (job.code, job.code_git_url, job.code_git_ref) == (None, url, "main")
    page = client.get(response["Location"]).content.decode()
    assert url in page and "fetched when the first attempt is submitted" in page
    refused = client.post(
        reverse("job-new"),
        _form(cluster, project, code_git_url="file:///home/mia/repo", name="local"),
    )
    assert refused.status_code == 200 and "https://" in refused.content.decode()
    assert Job.objects.count() == 1


def test_the_findings_pax_archive_is_refused_under_its_field_naming_the_limit(
    client: Client, member, project, cluster
) -> None:
    client.force_login(member)
    archive = SimpleUploadedFile("code.tar", finding_tar())
    response = client.post(reverse("job-new"), _form(cluster, project, code_archive=archive))
    assert response.status_code == 200
    page = response.content.decode()
    assert "of 150000 bytes, over the limit of 16384 bytes (16 KiB) for one header" in page
    assert not Job.objects.exists() and not CodeSnapshot.objects.exists()
