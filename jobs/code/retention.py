"""Code snapshots nothing names any more are removed CODE_SNAPSHOT_RETENTION after their
last use, or at once by their project's submitters, each removal recorded; upload records
past the rate's window go too.

A snapshot a job or a sweep names is never removed: each is checked again under its
row's lock as it is removed, so a submission that names it meanwhile keeps it (the
lookup by hash marks it used, `jobs.code.storage.snapshot_touch`).
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from jobs.access import require_submitter
from jobs.code.storage import retention, snapshot_file_release, snapshots_unnamed
from jobs.errors import JobError
from jobs.models import CodeSnapshot, CodeSnapshotRemoval, CodeUpload
from projects.models import Project

logger = logging.getLogger(__name__)

# Candidates read at a time.
BATCH = 500
# Jobs (sweeps) a refused deletion names, of each kind.
USERS_NAMED = 5


class CodeSnapshotInUse(JobError):
    """A snapshot a job or a sweep names: deleted only once they are gone."""

    status = 409
    code = "code_snapshot_in_use"


def code_snapshots_expire() -> int:
    """Remove the snapshots unused past the retention that nothing names; how many went."""
    cutoff = timezone.now() - retention()
    removed = 0
    while True:
        candidates = list(
            snapshots_unnamed()
            .filter(last_used_at__lt=cutoff)
            .order_by("last_used_at")
            .values_list("pk", flat=True)[:BATCH]
        )
        went = sum(_remove(pk, cutoff=cutoff) for pk in candidates)
        removed += went
        # A short batch was the last; one with none removed is another run's to finish.
        if len(candidates) < BATCH or not went:
            break
    window = timedelta(seconds=float(settings.CODE_UPLOAD_RATE_WINDOW))
    CodeUpload.objects.filter(at__lt=timezone.now() - window).delete()
    return removed


def code_snapshot_delete(*, user: User, project: Project, snapshot: CodeSnapshot) -> None:
    """Delete one of the project's snapshots at once, recorded as the user's; refused,
    naming them, while a job or a sweep names it."""
    require_submitter(user=user, project=project)
    with transaction.atomic():
        mine = CodeSnapshot.objects.filter(pk=snapshot.pk, project=project)
        locked = snapshots_unnamed().select_for_update().filter(pk__in=mine).first()
        if locked is None:
            if mine.exists():
                raise CodeSnapshotInUse(
                    f"Snapshot {snapshot.sha256[:12]} is used by {_users(snapshot)}; it stays "
                    "while they exist."
                )
            return  # deleted meanwhile
        removal = _record(locked, by=user)
    _release(locked, removal)


def _users(snapshot: CodeSnapshot) -> str:
    """What names the snapshot, as its project's members know them: job 12, 15; sweep 3."""
    parts = []
    for relation in CodeSnapshot._meta.related_objects:
        model = relation.related_model
        ids = list(
            model._default_manager.filter(**{relation.field.name: snapshot.pk})
            .order_by("pk")
            .values_list("pk", flat=True)[: USERS_NAMED + 1]
        )
        if ids:
            more = " and more" if len(ids) > USERS_NAMED else ""
            named = ", ".join(str(pk) for pk in ids[:USERS_NAMED])
            parts.append(f"{model._meta.verbose_name} {named}{more}")
    return "; ".join(parts)


def _remove(pk: int, *, cutoff: datetime) -> bool:
    with transaction.atomic():
        snapshot = (
            snapshots_unnamed()
            .select_for_update(skip_locked=True)
            .filter(pk=pk, last_used_at__lt=cutoff)
            .first()
        )
        if snapshot is None:  # used, named or being removed since the candidates were read
            return False
        removal = _record(snapshot, by=None)
    _release(snapshot, removal)
    return True


def _record(snapshot: CodeSnapshot, *, by: User | None) -> CodeSnapshotRemoval:
    """Record the removal and delete the row (in the caller's transaction, row locked)."""
    removal = CodeSnapshotRemoval.objects.create(
        project_id=snapshot.project_id,
        sha256=snapshot.sha256,
        size=snapshot.size,
        created_by_id=snapshot.created_by_id,
        created_at=snapshot.created_at,
        last_used_at=snapshot.last_used_at,
        removed_at=timezone.now(),
        removed_by=by,
        file_removed=False,
    )
    CodeSnapshot.objects.filter(pk=snapshot.pk).delete()
    return removal


def _release(snapshot: CodeSnapshot, removal: CodeSnapshotRemoval) -> None:
    """Remove the file once the row's removal is committed, unless another row names it."""
    if snapshot_file_release(snapshot.sha256):
        CodeSnapshotRemoval.objects.filter(pk=removal.pk).update(file_removed=True)
    logger.info(
        "code snapshot %s of project %s removed by %s (%d bytes, last used %s)",
        snapshot.sha256,
        snapshot.project_id,
        removal.removed_by or "the retention",
        snapshot.size,
        snapshot.last_used_at.isoformat(),
    )
