"""Code snapshots: stored once by content hash, checked before they are kept.

An upload is streamed to a temporary file (hashed and size-capped on the way),
checked in a process of its own with the same rules the cluster unpacks by
(`jobs.code.checker`: no `../`, absolute names, links out of the directory, devices,
long extended headers; the unpacked size capped by the project's quota, and the file
count), then recorded in its project within the project's code storage
quota and moved to `<CODE_SNAPSHOT_DIR>/<aa>/<sha256>.tar` (`jobs.code.storage`). A project
sees only its own snapshot rows.
"""

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile

from jobs.access import code_snapshots_visible_to, job_for_viewer, require_submitter
from jobs.code.checker import archive_check, unpacked_cap
from jobs.code.fetch import git_fetch
from jobs.code.storage import code_quota_check, snapshot_keep, snapshot_path, snapshot_touch
from jobs.code.upload_rate import code_upload_admit
from jobs.errors import JobError
from jobs.models import CodeSnapshot, Job
from jobs.specs import code_of
from portal_lib.viewers import Viewer
from projects.models import Project


def snapshot_bytes(snapshot: CodeSnapshot) -> bytes:
    return snapshot_path(snapshot.sha256).read_bytes()


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):.0f} MiB"


def _receive(chunks: Iterable[bytes], into: int) -> tuple[str, int]:
    """Write the upload to the open file `into`, hashing it; refused past the cap."""
    digest = hashlib.sha256()
    size = 0
    cap = settings.CODE_UPLOAD_MAX_BYTES
    for chunk in chunks:
        size += len(chunk)
        if size > cap:
            raise JobError(
                f"The code archive is over the cap of {_mib(cap)}; leave data and checkpoints "
                "out of it (the Python client packs only what .gitignore keeps).",
                errors={"archive": [f"Over the cap of {_mib(cap)}."]},
            )
        digest.update(chunk)
        os.write(into, chunk)
    return digest.hexdigest(), size


def snapshot_store(
    *, user: User, project: Project, chunks: Iterable[bytes]
) -> tuple[CodeSnapshot, bool]:
    """Check and keep an uploaded archive; the project's snapshot and whether it is new."""
    require_submitter(user=user, project=project)
    root = Path(settings.CODE_SNAPSHOT_DIR)
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=root, prefix=".upload-")
    try:
        try:
            sha256, size = _receive(chunks, handle)
        finally:
            os.close(handle)
        if not CodeSnapshot.objects.filter(project=project, sha256=sha256).exists():
            code_quota_check(project=project, size=size)  # before the check's work
        counts = archive_check(
            temporary, max_bytes=unpacked_cap(project), max_files=settings.CODE_MAX_FILES
        )
        return snapshot_keep(
            user=user,
            project=project,
            temporary=temporary,
            sha256=sha256,
            size=size,
            counts=counts,
        )
    finally:
        Path(temporary).unlink(missing_ok=True)  # gone already once kept


def snapshot_for(*, user: Viewer | None, project: Project, sha256: str) -> CodeSnapshot | None:
    """The project's snapshot with this hash, if the user may see the project's jobs.

    Looked up is used: the retention keeps it while a submission naming it is on its way.
    """
    snapshot = code_snapshots_visible_to(user=user).filter(project=project, sha256=sha256).first()
    return snapshot if snapshot is not None and snapshot_touch(snapshot) else None


def git_snapshot(*, user: User, project: Project, url: str, ref: str) -> dict[str, Any]:
    """Fetch a git URL and ref into a stored snapshot: the code fields that name it."""

    def store(chunks: Iterable[bytes]) -> CodeSnapshot:
        return snapshot_store(user=user, project=project, chunks=chunks)[0]

    commit, snapshot = git_fetch(url=url, ref=ref, store=store)
    branch = "" if not ref or commit.startswith(ref) else ref.removeprefix("refs/heads/")
    return {"code": snapshot, "code_commit": commit, "code_branch": branch}


def job_code_fetch(*, job: Job) -> Job:
    """Fetch the job's git URL and ref into a snapshot, once: the first fetch is kept.

    Run by the submission before its attempt reaches Slurm; a redelivered task that
    fetched too changes nothing (the job keeps the snapshot it got first).
    """
    if job.code_id is not None or not job.code_git_url:
        return job
    fetched = git_snapshot(
        user=job.user, project=job.project, url=job.code_git_url, ref=job.code_git_ref
    )
    Job.objects.filter(pk=job.pk, code__isnull=True).update(**fetched)
    job.refresh_from_db(fields=["code", "code_commit", "code_branch"])
    return job


def code_inputs(
    *, user: User, project: Project, archive: UploadedFile | None, code_from: int | None
) -> dict[str, Any] | None:
    """The code fields a form gives: an uploaded archive (stored once), else the snapshot
    of the job `code_from` names (one of the project's that the user may see); None: none."""
    if archive is not None:
        code_upload_admit(user=user, project=project, size=archive.size or 0)
        snapshot, _ = snapshot_store(user=user, project=project, chunks=archive.chunks())
        return {"code": snapshot}
    if code_from:
        original = job_for_viewer(user=user, job_id=code_from)
        if original is not None and original.project_id == project.pk:
            return code_of(original)
    return None
