"""Where snapshot archives are kept, and what they cost their project.

One file per content hash, shared by every project whose row names those bytes. A row
is written before its file is put in place, and a file is taken away before the rows
naming its hash are counted, so that an upload racing the retention always ends with
its file there (`snapshot_keep`, `snapshot_file_release`).
"""

import os
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, Exists, OuterRef, QuerySet, Sum
from django.utils import timezone

from jobs.errors import JobError
from jobs.models import CodeSnapshot
from projects.models import Project
from projects.storage import code_storage_refusal_message, fmt_bytes, project_code_storage

HASH_LENGTH = 64


def snapshot_path(sha256: str) -> Path:
    """Where the archive with this hash is kept (one file for every project that has it)."""
    if len(sha256) != HASH_LENGTH or not all(c in "0123456789abcdef" for c in sha256):
        raise ValueError(f"not a SHA-256: {sha256!r}")
    return Path(settings.CODE_SNAPSHOT_DIR) / sha256[:2] / f"{sha256}.tar"


def retention() -> timedelta:
    return timedelta(seconds=float(settings.CODE_SNAPSHOT_RETENTION))


def snapshots_unnamed() -> QuerySet[CodeSnapshot]:
    """Snapshots no row of any model names (jobs, sweeps, whatever points at a snapshot).

    Every job that is queued, running or may restart names its snapshot, as does every
    sweep whose trials may still start, so none of theirs is ever here.
    """
    unnamed = CodeSnapshot.objects.all()
    for relation in CodeSnapshot._meta.related_objects:
        naming = relation.related_model._default_manager.filter(
            **{relation.field.name: OuterRef("pk")}
        )
        unnamed = unnamed.filter(~Exists(naming))
    return unnamed


class CodeQuotaRefusal(JobError):
    """An archive that does not fit in its project's code storage quota (a job whose git
    fetch does not fit fails with these words, as for any other code error)."""

    code = "code_storage_quota"


def code_quota_check(*, project: Project, size: int) -> None:
    """Refuse an archive of `size` new bytes past the project's code storage quota."""
    storage = project_code_storage(project=project)
    if storage.fits(size):
        return
    unused = snapshots_unnamed().filter(project=project)
    total = unused.aggregate(n=Count("pk"), size=Sum("size"))
    days = retention().total_seconds() / 86400
    if total["n"]:
        largest = ", ".join(
            f"{sha256} ({fmt_bytes(size)})"
            for sha256, size in unused.order_by("-size", "pk").values_list("sha256", "size")[:3]
        )
        words = (
            f"{total['n']} of its snapshots ({fmt_bytes(total['size'])}) no job or sweep uses "
            f"go {days:g} days after their last use, or at once with DELETE "
            f"/api/v1/projects/{project.slug}/code/<sha256>/ (the largest: {largest})."
        )
    else:
        words = "Every snapshot it keeps is used by a job or a sweep."
    message = code_storage_refusal_message(
        project=project, storage=storage, size=size, unused=words
    )
    # Under the archive field whole: the API answers a 400 with its field errors only.
    raise CodeQuotaRefusal(message, errors={"archive": [message]})


def snapshot_keep(
    *, user: User, project: Project, temporary: str, sha256: str, size: int, counts: dict[str, int]
) -> tuple[CodeSnapshot, bool]:
    """Record a checked archive in its project (quota checked under the project's lock),
    then move it into place; the snapshot and whether it is new to the project."""
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        # An update, not a read: a row the retention is removing is waited for, then gone.
        known = CodeSnapshot.objects.filter(project=project, sha256=sha256).update(
            last_used_at=timezone.now()
        )
        if known:
            snapshot = CodeSnapshot.objects.get(project=project, sha256=sha256)
        else:
            code_quota_check(project=project, size=size)
            snapshot = CodeSnapshot.objects.create(
                project=project,
                sha256=sha256,
                size=size,
                unpacked_size=counts["bytes"],
                files=counts["files"],
                created_by=user,
            )
    final = snapshot_path(sha256)
    try:
        final.parent.mkdir(mode=0o700, exist_ok=True)
        # The same bytes replace the same bytes: a file the retention took away comes back.
        os.replace(temporary, final)
    except OSError:
        if not known:
            CodeSnapshot.objects.filter(pk=snapshot.pk).delete()
        raise
    return snapshot, not known


def snapshot_touch(snapshot: CodeSnapshot) -> bool:
    """Mark a snapshot used now (at most twice per retention); False if it is gone."""
    now = timezone.now()
    if snapshot.last_used_at > now - retention() / 2:
        return True
    return bool(CodeSnapshot.objects.filter(pk=snapshot.pk).update(last_used_at=now))


def snapshot_file_release(sha256: str) -> bool:
    """Remove the archive with this hash unless a project's row still names it; whether it went.

    Call after the removed row is committed. The file is renamed away first, then the rows
    counted: an upload whose row was not yet counted puts its file back after its commit.
    """
    path = snapshot_path(sha256)
    away = path.with_name(f".removing-{uuid.uuid4().hex}")
    try:
        os.rename(path, away)
    except FileNotFoundError:
        return False
    if CodeSnapshot.objects.filter(sha256=sha256).exists():
        os.replace(away, path)
        return False
    away.unlink()
    return True
