"""Code snapshots over REST: upload once by hash, refuse unsafe archives and outsiders,
name a snapshot in a submission, keep it in a clone."""

import io
import json
import tarfile
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.code.snapshots import snapshot_path
from jobs.models import CodeSnapshot, Job
from projects.models import Membership, Project
from tests.helpers import Tokens, bearer

SPEC = {
    "project": "vision",
    "cluster": "alps",
    "name": "with-code",
    "command": "python -m trainer.main",
    "partition": "gpu",
    "cpus_per_task": 1,
    "time_limit": "00:30:00",
}
UPLOAD = "/api/v1/projects/vision/code/"

pytestmark = pytest.mark.usefixtures("service_account", "snapshot_dir")


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    return settings.CODE_SNAPSHOT_DIR


def _tar(*members: tuple[str, bytes], link: tuple[str, str] | None = None) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type, info.linkname = tarfile.SYMTYPE, link[1]
            archive.addfile(info)
    return raw.getvalue()


CODE = _tar(("trainer/__init__.py", b""), ("trainer/main.py", b"print('hi')\n"))


def _upload(client: Client, data: bytes, path: str = UPLOAD):
    return client.post(path, {"archive": SimpleUploadedFile("code.tar.gz", data)})


def _post(client: Client, path: str, body: dict[str, object]):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_an_archive_is_stored_once_by_its_hash(member, tokens: Tokens, snapshot_dir) -> None:
    first = _upload(bearer(tokens.member), CODE)
    assert first.status_code == 201, first.content
    body = first.json()
    assert (body["files"], body["unpacked_size"], body["size"]) == (2, 12, len(CODE))
    again = _upload(bearer(tokens.member), CODE)
    assert again.status_code == 200 and again.json()["sha256"] == body["sha256"]
    assert CodeSnapshot.objects.count() == 1
    stored = [p for p in Path(snapshot_dir).rglob("*") if p.is_file()]
    assert stored == [snapshot_path(body["sha256"])]
    assert stored[0].read_bytes() == CODE
    looked_up = bearer(tokens.viewer).get(f"{UPLOAD}{body['sha256']}/")
    assert looked_up.status_code == 200 and looked_up.json()["sha256"] == body["sha256"]
    assert bearer(tokens.member).get(f"{UPLOAD}{'0' * 64}/").status_code == 404


@pytest.mark.parametrize(
    ("archive", "says"),
    [
        (_tar(("../x", b"evil")), "'..' component"),
        (_tar(("/etc/cron.d/x", b"evil")), "absolute path"),
        (_tar(("a", b"x"), link=("escape", "../../etc")), "points out of the directory"),
        (b"PK\x03\x04 a zip", "not a tar archive"),
    ],
    ids=["dotdot", "absolute", "symlink-out", "zip"],
)
def test_an_unsafe_archive_is_refused_and_not_kept(
    tokens: Tokens, snapshot_dir, archive: bytes, says: str
) -> None:
    response = _upload(bearer(tokens.member), archive)
    assert response.status_code == 400, response.content
    assert says in response.json()["archive"][0]
    assert not CodeSnapshot.objects.exists()
    assert [p for p in Path(snapshot_dir).rglob("*") if p.is_file()] == []


def test_an_upload_over_the_cap_is_refused(settings, tokens: Tokens) -> None:
    settings.CODE_UPLOAD_MAX_BYTES = 100
    response = _upload(bearer(tokens.member), _tar(("big", bytes(range(256)) * 8)))
    assert response.status_code == 400
    assert "Over the cap of" in response.json()["archive"][0]


def test_outsiders_and_viewers_cannot_upload_or_look(tokens: Tokens, outsider) -> None:
    sha = _upload(bearer(tokens.member), CODE).json()["sha256"]
    assert _upload(bearer(tokens.outsider), CODE).status_code == 404
    assert bearer(tokens.outsider).get(f"{UPLOAD}{sha}/").status_code == 404
    assert bearer(None).get(f"{UPLOAD}{sha}/").status_code == 401
    assert _upload(bearer(None), CODE).status_code == 401
    # Viewers look, they do not add code (submitting is for owners and members).
    refused = _upload(bearer(tokens.viewer), _tar(("other.py", b"")))
    assert refused.status_code == 403
    assert bearer(tokens.owner_read).get(f"{UPLOAD}{sha}/").status_code == 200
    assert _upload(bearer(tokens.owner_read), CODE).status_code == 403
    # The outsider's own project cannot name the snapshot either.
    theirs = Project.objects.create(slug="speech", name="Speech")
    Membership.objects.create(user=outsider, project=theirs, role=Membership.Role.OWNER)
    submit = _post(
        bearer(tokens.outsider), "/api/v1/jobs/", {**SPEC, "project": "speech", "code": sha}
    )
    assert submit.status_code == 400 and "no code snapshot" in submit.json()["code"][0]


def test_a_job_names_its_snapshot_and_a_clone_keeps_it(tokens: Tokens) -> None:
    sha = _upload(bearer(tokens.member), CODE).json()["sha256"]
    body = {
        **SPEC,
        "code": sha,
        "code_commit": "a" * 40,
        "code_branch": "main",
        "code_diff": "--- a/x\n+++ b/x\n-1\n+2\n",
    }
    response = _post(bearer(tokens.member), "/api/v1/jobs/", body)
    assert response.status_code == 201, response.content
    job = response.json()
    assert job["code"]["sha256"] == sha and job["code_commit"] == "a" * 40
    assert (job["code_branch"], job["code_diff"]) == ("main", body["code_diff"])

    clone = _post(bearer(tokens.member), f"/api/v1/jobs/{job['id']}/clone/", {"nodes": 1})
    assert clone.status_code == 201, clone.content
    copied = clone.json()
    assert copied["code"]["sha256"] == sha and copied["code_diff"] == body["code_diff"]
    assert Job.objects.get(pk=copied["id"]).code_id == Job.objects.get(pk=job["id"]).code_id
    assert CodeSnapshot.objects.count() == 1


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        ({"code_git_url": "file:///etc"}, "code_git_url", "https://"),
        ({"code_git_url": "/home/alice/repo"}, "code_git_url", "https://"),
        ({"code_git_url": "ssh://git@host/repo"}, "code_git_url", "https://"),
        ({"code_git_url": "https://user:secret@host/repo"}, "code_git_url", "credentials"),
        (
            {"code_git_url": "https://host/r", "code_git_ref": "--upload-pack=x"},
            "code_git_ref",
            "branch",
        ),
        ({"code_git_ref": "main"}, "code_git_ref", "needs the git URL"),
        ({"code_commit": "not-a-hash"}, "code_commit", "hexadecimal"),
        ({"code": "ab" * 32, "code_git_url": "https://host/r"}, "code_git_url", "not both"),
    ],
)
def test_code_fields_are_checked(tokens: Tokens, change, field, says) -> None:
    response = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, **change})
    assert response.status_code == 400, response.content
    assert says in " ".join(response.json()[field])
