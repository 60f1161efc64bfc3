"""Code snapshots nothing names any more are removed CODE_SNAPSHOT_RETENTION after their
last use, each removal recorded; upload records past the rate's window go too.

A snapshot a job or a sweep names is never removed: each is checked again under its
row's lock as it is removed, so a submission that names it meanwhile keeps it (the
lookup by hash marks it used, `jobs.code.storage.snapshot_touch`).
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.code.storage import retention, snapshot_file_release, snapshots_unnamed
from jobs.models import CodeSnapshot, CodeSnapshotRemoval, CodeUpload

logger = logging.getLogger(__name__)

# Candidates read at a time.
BATCH = 500


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
        removal = CodeSnapshotRemoval.objects.create(
            project_id=snapshot.project_id,
            sha256=snapshot.sha256,
            size=snapshot.size,
            created_by_id=snapshot.created_by_id,
            created_at=snapshot.created_at,
            last_used_at=snapshot.last_used_at,
            removed_at=timezone.now(),
            file_removed=False,
        )
        CodeSnapshot.objects.filter(pk=pk).delete()
    if snapshot_file_release(snapshot.sha256):
        CodeSnapshotRemoval.objects.filter(pk=removal.pk).update(file_removed=True)
    logger.info(
        "code snapshot %s of project %s removed (%d bytes, last used %s)",
        snapshot.sha256,
        snapshot.project_id,
        snapshot.size,
        snapshot.last_used_at.isoformat(),
    )
    return True
