"""Quota edits with their audit trail: who changed which limit, when, from what to what."""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from projects.models import Quota, QuotaChange

AUDITED_QUOTA_FIELDS = (
    "gpu_hours_per_period",
    "cpu_hours_per_period",
    "node_hours_per_period",
    "period",
    "max_concurrent_gpus",
    "max_concurrent_jobs",
    "max_gpus_per_job",
    "max_wall_time",
    "allowed_partitions",
)


def _shown(value: object) -> str:
    return "" if value is None else str(value)


def quota_changes_record(
    *,
    quota: Quota,
    user: User | None,
    before: dict[str, object],
    clusters_before: list[str] | None = None,
) -> list[QuotaChange]:
    """Audit rows for each limit that differs from `before` (the values as loaded)."""
    quota.refresh_from_db(fields=list(AUDITED_QUOTA_FIELDS))  # as stored: 150.00, not 150
    now = timezone.now()
    changes = [
        QuotaChange(
            quota=quota,
            user=user,
            at=now,
            field=name,
            old_value=_shown(before.get(name)),
            new_value=_shown(getattr(quota, name)),
        )
        for name in AUDITED_QUOTA_FIELDS
        if name in before and before[name] != getattr(quota, name)
    ]
    if clusters_before is not None:
        after = sorted(quota.allowed_clusters.values_list("name", flat=True))
        if after != sorted(clusters_before):
            changes.append(
                QuotaChange(
                    quota=quota,
                    user=user,
                    at=now,
                    field="allowed_clusters",
                    old_value=", ".join(sorted(clusters_before)),
                    new_value=", ".join(after),
                )
            )
    return QuotaChange.objects.bulk_create(changes)


def quota_snapshot(quota: Quota) -> dict[str, object]:
    return {name: getattr(quota, name) for name in AUDITED_QUOTA_FIELDS}


@transaction.atomic
def quota_update(*, quota: Quota, user: User | None, **values: object) -> list[QuotaChange]:
    """Change a project's limits, recording who changed what from what to what."""
    locked = Quota.objects.select_for_update().get(pk=quota.pk)
    before = quota_snapshot(locked)
    for name, value in values.items():
        if name not in AUDITED_QUOTA_FIELDS:
            raise ValueError(f"quota_update: unknown limit {name!r}")
        setattr(locked, name, value)
    locked.full_clean()
    locked.save()
    return quota_changes_record(quota=locked, user=user, before=before)
