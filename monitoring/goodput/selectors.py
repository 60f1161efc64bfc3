"""Reads of goodput for the job page and the API: each ended attempt's card, the live ladder."""

from datetime import datetime
from typing import Any

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.goodput.efficiency import PARTS
from monitoring.models import AttemptActivity, EfficiencyCard
from projects.models import IdlePolicy

PART_LABELS = {
    "startup": "Startup (start to first step)",
    "productive": "Productive",
    "declared_pauses": "Declared pauses",
    "hung": "Hung",
    "idle": "Idle GPUs",
    "lost": "Lost (redone by the next attempt)",
}


def _card_view(attempt: Attempt, card: EfficiencyCard) -> dict[str, Any]:
    data = card.data
    total = data["gpu_hours"] or 0.0
    return {
        "attempt": attempt.number,
        "from_ledger": card.from_ledger,
        **data,
        "rows": [
            {
                "part": part,
                "label": PART_LABELS[part],
                "gpu_hours": data["parts"][part],
                "share": data["parts"][part] / total if total else 0.0,
            }
            for part in PARTS
        ],
    }


def job_efficiency(*, job: Job) -> list[dict[str, Any]]:
    """Each ended attempt's efficiency card, oldest first (two queries)."""
    attempts = {a.pk: a for a in Attempt.objects.filter(job_id=job.pk)}
    cards = EfficiencyCard.objects.filter(attempt_id__in=attempts)
    return sorted(
        (_card_view(attempts[c.attempt_id], c) for c in cards), key=lambda c: c["attempt"]
    )


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def idle_ladder(*, job: Job) -> dict[str, Any] | None:
    """The running attempt's idle-GPU ladder, if its project has a policy (three queries)."""
    attempt = Attempt.objects.filter(job_id=job.pk).order_by("-number").first()
    if attempt is None or attempt.state != State.RUNNING:
        return None
    policy = IdlePolicy.objects.filter(project_id=job.project_id).first()
    if policy is None:
        return None
    activity = AttemptActivity.objects.filter(attempt=attempt).first()
    idle_for = None
    if activity and activity.idle_since_x is not None and activity.idle_last_x is not None:
        idle_for = activity.idle_last_x - activity.idle_since_x
    return {
        "attempt": attempt.number,
        "threshold_percent": policy.threshold_percent,
        "warn_after_seconds": policy.warn_after.total_seconds(),
        "cancel_after_seconds": policy.cancel_after.total_seconds()
        if policy.cancel_after
        else None,
        "idle_for_seconds": idle_for,
        "warned_at": _when(activity.warned_at) if activity else None,
        "cancel_at": _when(activity.cancel_at) if activity else None,
        "cancelled_at": _when(activity.cancelled_at) if activity else None,
    }
