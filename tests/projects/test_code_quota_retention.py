"""Code snapshots nothing names are removed after the retention, each removal recorded
(issue 33, point 4); a snapshot a job or a sweep names is never removed, whatever state
the job is in.

Before: every snapshot was kept forever under CODE_SNAPSHOT_DIR.
"""

import io
import tarfile
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth.models import User
from django.utils import timezone

from jobs import tasks
from jobs.code import retention
from jobs.code.retention import code_snapshot_delete, code_snapshots_expire
from jobs.code.snapshots import snapshot_bytes, snapshot_path, snapshot_store
from jobs.code.storage import snapshot_file_release
from jobs.enums import State
from jobs.models import CodeSnapshot, CodeSnapshotRemoval, CodeUpload, Job
from projects.models import Membership, Project
from tests import factories
from tests.helpers import Tokens, bearer

pytestmark = pytest.mark.usefixtures("snapshot_dir")

RETENTION = 7 * 24 * 3600.0


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    settings.CODE_SNAPSHOT_RETENTION = RETENTION
    return settings.CODE_SNAPSHOT_DIR


def _tar(text: str) -> bytes:
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as archive:
        data = text.encode()
        info = tarfile.TarInfo("train.py")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return raw.getvalue()


def _snapshot(user: User, project: Project, text: str, *, unused_days: float) -> CodeSnapshot:
    snapshot, _ = snapshot_store(user=user, project=project, chunks=[_tar(text)])
    used = timezone.now() - timedelta(days=unused_days)
    CodeSnapshot.objects.filter(pk=snapshot.pk).update(last_used_at=used)
    snapshot.refresh_from_db()
    return snapshot


def test_an_unnamed_snapshot_unused_past_the_retention_is_removed_and_recorded(
    member: User, project: Project
) -> None:
    old = _snapshot(member, project, "print('old')", unused_days=8)
    recent = _snapshot(member, project, "print('recent')", unused_days=6)

    assert code_snapshots_expire() == 1

    assert list(CodeSnapshot.objects.all()) == [recent]
    assert not snapshot_path(old.sha256).exists()
    assert snapshot_path(recent.sha256).exists()
    removal = CodeSnapshotRemoval.objects.get()
    assert (removal.project_id, removal.sha256, removal.size) == (project.pk, old.sha256, old.size)
    assert (removal.created_by_id, removal.last_used_at) == (member.pk, old.last_used_at)
    assert removal.file_removed is True
    assert code_snapshots_expire() == 0  # nothing twice


def test_one_run_removes_every_batch(monkeypatch, member: User, project: Project) -> None:
    monkeypatch.setattr(retention, "BATCH", 2)
    for n in range(5):
        _snapshot(member, project, f"print({n})", unused_days=8)
    assert code_snapshots_expire() == 5
    assert not CodeSnapshot.objects.exists() and CodeSnapshotRemoval.objects.count() == 5


@pytest.mark.parametrize(
    "state",
    [State.QUEUED, State.SUBMITTING, State.PENDING, State.RUNNING, State.FAILED,
     State.PREEMPTED, State.COMPLETED, State.CANCELLED],
)  # fmt: skip
def test_a_snapshot_a_job_names_is_never_removed(
    member: User, project: Project, state: State
) -> None:
    """Queued, running, restartable or ended: the job names it, so it stays (and a restart
    or a clone unpacks the very same bytes)."""
    snapshot = _snapshot(member, project, "print('job')", unused_days=365)
    factories.job(project, member, factories.cluster(), code=snapshot, state=state, max_restarts=3)

    assert code_snapshots_expire() == 0

    assert CodeSnapshot.objects.filter(pk=snapshot.pk).exists()
    assert snapshot_bytes(snapshot) == _tar("print('job')")
    assert not CodeSnapshotRemoval.objects.exists()


def test_a_snapshot_a_sweep_names_is_never_removed(member: User, project: Project) -> None:
    snapshot = _snapshot(member, project, "print('sweep')", unused_days=365)
    job, _ = factories.job(project, member, factories.cluster())
    sweep = factories.sweep(job)
    type(sweep).objects.filter(pk=sweep.pk).update(code=snapshot)
    Job.objects.filter(pk=job.pk).delete()

    assert code_snapshots_expire() == 0
    assert snapshot_path(snapshot.sha256).exists()


def test_looking_a_snapshot_up_by_its_hash_keeps_it(
    tokens: Tokens, member: User, project: Project
) -> None:
    """The client asks for the hash before it submits: the submission must find it there."""
    snapshot = _snapshot(member, project, "print('asked')", unused_days=8)
    looked_up = bearer(tokens.member).get(f"/api/v1/projects/vision/code/{snapshot.sha256}/")
    assert looked_up.status_code == 200

    assert code_snapshots_expire() == 0
    snapshot.refresh_from_db()
    assert snapshot.last_used_at > timezone.now() - timedelta(minutes=1)


def test_uploading_the_same_bytes_again_keeps_the_snapshot(member: User, project: Project) -> None:
    _snapshot(member, project, "print('again')", unused_days=8)
    snapshot_store(user=member, project=project, chunks=[_tar("print('again')")])
    assert code_snapshots_expire() == 0


def test_bytes_another_project_keeps_stay_on_disk(member: User, project: Project) -> None:
    other = Project.objects.create(slug="speech", name="Speech")
    Membership.objects.create(user=member, project=other, role=Membership.Role.MEMBER)
    mine = _snapshot(member, project, "print('shared')", unused_days=8)
    theirs = _snapshot(member, other, "print('shared')", unused_days=1)

    assert code_snapshots_expire() == 1

    assert list(CodeSnapshot.objects.all()) == [theirs]
    assert snapshot_bytes(theirs) == _tar("print('shared')")
    assert CodeSnapshotRemoval.objects.get().file_removed is False
    assert mine.sha256 == theirs.sha256


def test_a_file_a_row_still_names_is_put_back(member: User, project: Project) -> None:
    snapshot = _snapshot(member, project, "print('named')", unused_days=0)
    assert snapshot_file_release(snapshot.sha256) is False
    assert snapshot_bytes(snapshot) == _tar("print('named')")
    assert [p.name for p in snapshot_path(snapshot.sha256).parent.iterdir()] == [
        f"{snapshot.sha256}.tar"
    ]


def test_upload_records_past_the_rate_window_go(member: User, project: Project) -> None:
    now = timezone.now()
    for age in (10, 3700):
        CodeUpload.objects.create(
            user=member, project=project, size=1, at=now - timedelta(seconds=age)
        )
    code_snapshots_expire()
    assert list(CodeUpload.objects.values_list("size", flat=True)) == [1]
    assert CodeUpload.objects.get().at == now - timedelta(seconds=10)


def test_beat_runs_the_removal_hourly(member: User, project: Project) -> None:
    entry = django_settings.CELERY_BEAT_SCHEDULE["remove-unused-code-snapshots"]
    assert (entry["task"], entry["schedule"]) == ("jobs.tasks.remove_unused_code_snapshots", 3600.0)
    _snapshot(member, project, "print('old')", unused_days=30)
    tasks.remove_unused_code_snapshots.apply().get()
    assert not CodeSnapshot.objects.exists() and CodeSnapshotRemoval.objects.count() == 1


def test_a_member_deletes_an_unused_snapshot_at_once(
    tokens: Tokens, member: User, project: Project
) -> None:
    snapshot = _snapshot(member, project, "print('mine')", unused_days=0)
    url = f"/api/v1/projects/vision/code/{snapshot.sha256}/"

    assert bearer(tokens.member).delete(url).status_code == 204

    assert not CodeSnapshot.objects.exists()
    assert not snapshot_path(snapshot.sha256).exists()
    removal = CodeSnapshotRemoval.objects.get()
    assert (removal.sha256, removal.removed_by_id, removal.file_removed) == (
        snapshot.sha256,
        member.pk,
        True,
    )
    assert bearer(tokens.member).delete(url).status_code == 404


def test_a_snapshot_a_job_uses_is_not_deleted_and_the_refusal_names_the_job(
    tokens: Tokens, member: User, project: Project
) -> None:
    snapshot = _snapshot(member, project, "print('used')", unused_days=0)
    job, _ = factories.job(project, member, factories.cluster(), code=snapshot)

    refused = bearer(tokens.member).delete(f"/api/v1/projects/vision/code/{snapshot.sha256}/")

    assert refused.status_code == 409, refused.content
    assert refused.json()["detail"] == (
        f"Snapshot {snapshot.sha256[:12]} is used by job {job.pk}; it stays while they exist."
    )
    assert snapshot_bytes(snapshot) == _tar("print('used')")
    assert not CodeSnapshotRemoval.objects.exists()


def test_viewers_and_outsiders_delete_nothing(
    tokens: Tokens, member: User, project: Project
) -> None:
    snapshot = _snapshot(member, project, "print('kept')", unused_days=0)
    url = f"/api/v1/projects/vision/code/{snapshot.sha256}/"
    assert bearer(tokens.viewer).delete(url).status_code == 403
    assert bearer(tokens.outsider).delete(url).status_code == 404
    assert bearer(None).delete(url).status_code == 401
    assert CodeSnapshot.objects.filter(pk=snapshot.pk).exists()


def test_the_admin_lists_removals_with_who_removed_them(
    client, staff: User, member: User, project: Project
) -> None:
    by_hand = _snapshot(member, project, "print('by hand')", unused_days=0)
    expired = _snapshot(member, project, "print('expired')", unused_days=30)
    code_snapshot_delete(user=member, project=project, snapshot=by_hand)
    code_snapshots_expire()
    client.force_login(staff)
    page = client.get("/admin/jobs/codesnapshotremoval/").content.decode()
    assert by_hand.sha256 in page and expired.sha256 in page
    assert '<td class="field-removed_by nowrap">mia</td>' in page
    assert '<td class="field-removed_by nowrap">-</td>' in page
    assert client.get("/admin/jobs/codesnapshot/").status_code == 200
