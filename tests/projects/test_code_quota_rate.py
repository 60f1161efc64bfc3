"""The code upload rate per person (issue 33, point 4): archives and bytes in a sliding
window, a 429 naming when to retry, every upload counted whether it is kept or not.

Before: one person could send 100 MiB archives without end, each hashed and checked.
"""

import io
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.utils import timezone

from jobs.code.snapshots import code_inputs
from jobs.code.upload_rate import CodeUploadRateExceeded
from jobs.models import CodeSnapshot, CodeUpload
from projects.models import Project
from tests.helpers import Tokens, bearer

UPLOAD = "/api/v1/projects/vision/code/"

pytestmark = pytest.mark.usefixtures("snapshot_dir")


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    settings.CODE_UPLOAD_RATE_WINDOW = 3600.0
    return settings.CODE_SNAPSHOT_DIR


def _tar(name: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        data = f"print({name!r})\n".encode()
        info = tarfile.TarInfo(f"{name}.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


CODE = _tar("train")  # every _tar is this size: one 512-byte member in a 10 KiB record


def _upload(client: Client, data: bytes = CODE):
    return client.post(UPLOAD, {"archive": SimpleUploadedFile("code.tar", data)})


def _age_oldest(user: User, seconds: float) -> None:
    oldest = CodeUpload.objects.filter(user=user).order_by("at").first()
    assert oldest is not None
    CodeUpload.objects.filter(pk=oldest.pk).update(at=oldest.at - timedelta(seconds=seconds))


def test_past_the_archives_per_hour_a_429_says_the_limit_and_when_to_retry(
    settings, tokens: Tokens, member: User, owner: User
) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 3
    settings.CODE_UPLOAD_RATE_BYTES = 0
    # The same bytes again count too: each is received, hashed and looked up.
    assert [_upload(bearer(tokens.member)).status_code for _ in range(3)] == [201, 200, 200]

    refused = _upload(bearer(tokens.member), _tar("other"))

    assert refused.status_code == 429, refused.content
    wait = int(refused["Retry-After"])
    assert 3590 <= wait <= 3600
    assert refused.json()["detail"] == (
        f"You may upload at most 3 code archives in an hour; try again in {wait} s."
    )
    assert CodeSnapshot.objects.count() == 1  # the refused archive was not kept
    # Someone else's uploads are their own.
    assert _upload(bearer(tokens.owner), _tar("theirs")).status_code == 201
    # The oldest leaving the window is when the next may come: said, then so.
    _age_oldest(member, 3500)
    again = _upload(bearer(tokens.member), _tar("other"))
    assert again.status_code == 429 and 90 <= int(again["Retry-After"]) <= 100
    _age_oldest(member, 100)
    assert _upload(bearer(tokens.member), _tar("other")).status_code == 201


def test_past_the_bytes_per_hour_a_429_waits_for_enough_to_leave(
    settings, tokens: Tokens, member: User
) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 100
    settings.CODE_UPLOAD_RATE_BYTES = 2 * len(CODE)
    assert _upload(bearer(tokens.member), _tar("a")).status_code == 201
    _age_oldest(member, 1800)
    assert _upload(bearer(tokens.member), _tar("b")).status_code == 201

    refused = _upload(bearer(tokens.member), _tar("c"))

    assert refused.status_code == 429, refused.content
    # One archive's room is enough: the older, 30 minutes in, leaves in about 30 minutes.
    wait = int(refused["Retry-After"])
    assert 1790 <= wait <= 1800
    assert refused.json()["detail"] == (
        f"You may upload at most 20.0 KiB of code in an hour; try again in {wait} s."
    )


def test_an_archive_over_the_bytes_per_hour_passes_alone_in_an_empty_window(
    settings, tokens: Tokens, member: User
) -> None:
    settings.CODE_UPLOAD_RATE_BYTES = len(CODE) - 1
    assert _upload(bearer(tokens.member)).status_code == 201
    refused = _upload(bearer(tokens.member), _tar("b"))
    # Only the newest leaving empties the window: then the next one passes alone.
    assert refused.status_code == 429 and 3590 <= int(refused["Retry-After"]) <= 3600


def test_an_archive_refused_for_the_quota_counts_against_the_rate(settings, tokens: Tokens) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 2
    settings.CODE_QUOTA_BYTES = 0
    assert [_upload(bearer(tokens.member)).status_code for _ in range(2)] == [400, 400]
    assert _upload(bearer(tokens.member)).status_code == 429


def test_a_viewer_is_refused_and_not_counted(settings, tokens: Tokens) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 1
    assert _upload(bearer(tokens.viewer)).status_code == 403
    assert _upload(bearer(tokens.viewer)).status_code == 403
    assert not CodeUpload.objects.exists()


def test_the_job_forms_uploads_share_the_count(
    settings, tokens: Tokens, member: User, project: Project
) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 1
    code_inputs(
        user=member,
        project=project,
        archive=SimpleUploadedFile("code.tar", CODE),
        code_from=None,
    )
    with pytest.raises(
        CodeUploadRateExceeded, match="You may upload one code archive in an hour; try again in"
    ):
        code_inputs(
            user=member,
            project=project,
            archive=SimpleUploadedFile("code.tar", _tar("b")),
            code_from=None,
        )
    assert _upload(bearer(tokens.member), _tar("c")).status_code == 429


def test_zero_switches_the_rate_off(settings, tokens: Tokens) -> None:
    settings.CODE_UPLOAD_RATE_LIMIT = 0
    assert {_upload(bearer(tokens.member)).status_code for _ in range(5)} == {201, 200}
    assert CodeUpload.objects.filter(at__lte=timezone.now()).count() == 0
