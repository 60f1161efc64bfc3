"""An ended attempt's efficiency card: read its rows, compute (`goodput.efficiency`), store.

Computed by the poll once the attempt is read to its end and its restart decided
(the next attempt says what of it is redone), and again once the ledger's charge
exists if it came later (sacct): the card's parts then sum to the charge.
"""

import logging
from collections import defaultdict
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Exists, OuterRef
from django.utils import timezone

from jobs.billing import measured_by_portal
from jobs.enums import FINAL_STATES, Template
from jobs.models import Attempt, Job
from jobs.rundir import gpu_series
from monitoring.checkpoints.registry import checkpoint_path
from monitoring.goodput.efficiency import PARTS, GpuTrace, Span, build_card, memory_total_for
from monitoring.hangs.heartbeats import progress_from_json
from monitoring.hangs.rules import HANG
from monitoring.models import AttemptActivity, AttemptProgress, Checkpoint, EfficiencyCard
from monitoring.reading.throughput import COMPUTED_MFU
from monitoring.runs.summary import run_summary_finish
from monitoring.series.read import series_names, series_read
from projects.models import IdlePolicy, UsageCharge

logger = logging.getLogger(__name__)

MAX_CARD_POINTS = 2_000_000  # per series: read whole, never downsampled
REFRESH_BATCH = 50
REFRESH_WITHIN = timedelta(days=7)
_TRACE_METRICS = {"utilization": "utilization", "memory_used": "memory_mib", "power": "power_w"}


def _points(attempt_id: int, name: str) -> list[tuple[float, float]]:
    data = series_read(attempt_id=attempt_id, name=name, max_points=MAX_CARD_POINTS)
    return list(zip(data.xs, data.ys, strict=True))


def _traces(attempt: Attempt) -> list[GpuTrace]:
    found: dict[tuple[str, int], dict[str, Any]] = defaultdict(dict)
    for name in series_names(attempt_id=attempt.pk):
        gpu = gpu_series(name)
        if gpu is not None and gpu.metric in _TRACE_METRICS:
            found[(gpu.node, gpu.index)][_TRACE_METRICS[gpu.metric]] = _points(attempt.pk, name)
    return [GpuTrace(node, index, **found[(node, index)]) for node, index in sorted(found)]


def _resumed(attempt: Attempt, start: float) -> tuple[float | None, int | None]:
    """Where the redone work starts, and the step the next attempt resumed from."""
    following = Attempt.objects.filter(job_id=attempt.job_id, number=attempt.number + 1).first()
    if following is None:
        return None, None  # nothing is redone (yet)
    for checkpoint in Checkpoint.objects.filter(attempt=attempt, complete=True).select_related(
        "attempt"
    ):
        if following.resume_from and checkpoint_path(checkpoint) == following.resume_from:
            return checkpoint.modified_at.timestamp(), checkpoint.step
    # From an older attempt's checkpoint, or from scratch: all of this one is redone.
    return start, None


def _threshold(job: Job) -> int:
    policy = IdlePolicy.objects.filter(project_id=job.project_id).first()
    return policy.threshold_percent if policy else int(settings.EFFICIENCY_IDLE_PERCENT)


def _hung_seconds(progress: AttemptProgress | None, end: float) -> float:
    """From the last step any rank (else its output) made to the end, for an attempt the
    detector flagged hung."""
    if progress is None or progress.verdict != HANG:
        return 0.0
    steps = [
        float(rank["step_at"])
        for rank in progress.ranks.values()
        if isinstance(rank, dict) and isinstance(rank.get("step_at"), int | float)
    ]
    if not steps and progress.pace:
        steps = [float(progress.pace[-1][0])]  # known by its output alone: the furthest step
    if not steps:
        return 0.0
    return max(0.0, end - max(steps))


def declared_pause_seconds(progress: AttemptProgress | None, until: float) -> float:
    """The attempt's declared pauses: per rank, the ended ones' total and the one it was in
    at the end (up to `until`: the end, or where its lost work starts); the longest rank's
    (ranks pause together: the others wait for it at a barrier)."""
    if progress is None:
        return 0.0
    longest = 0.0
    for rank, item in (progress.ranks or {}).items():
        try:
            r = progress_from_json(rank, item)
        except (TypeError, ValueError, AttributeError):
            continue
        current = 0.0
        if r.pause and isinstance(r.pause_since, int | float):
            current = max(until - float(r.pause_since), 0.0)
        longest = max(longest, r.paused + current)
    return longest


def attempt_card_compute(
    *,
    attempt: Attempt,
    declared_pauses: float | None = None,
    hung_seconds: float | None = None,
) -> EfficiencyCard | None:
    """Compute and store the card of an ended attempt; None if it never ran.

    `hung_seconds` defaults to the hang detector's: from the last step to the end of an
    attempt it flagged hung; `declared_pauses` (seconds) to every declared pause its
    ranks' heartbeats reported (`declared_pause_seconds`).
    """
    attempt = Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk)
    job = attempt.job
    charge = UsageCharge.objects.filter(attempt=attempt).first()
    if charge is not None:
        start, end, total = charge.started_at, charge.ended_at, float(charge.gpu_hours)
    else:
        measured = measured_by_portal(attempt)
        if measured is None:
            return None
        start, end = measured.started_at, measured.ended_at
        total = job.total_gpus * (end - start).total_seconds() / 3600
    activity = AttemptActivity.objects.filter(attempt=attempt).first()
    first_step = activity.first_step_at if activity else None
    if job.template == Template.JUPYTER:
        # A session logs no steps: its GPUs are at work, or idle, from its start on.
        first_step = start
    lost_from, resumed_step = _resumed(attempt, start.timestamp())
    span = Span(
        start=start.timestamp(),
        end=end.timestamp(),
        submitted=attempt.submitted_at.timestamp() if attempt.submitted_at else None,
        first_step=first_step.timestamp() if first_step else None,
        lost_from=lost_from,
    )
    progress = AttemptProgress.objects.filter(attempt=attempt).first()
    card = build_card(
        traces=_traces(attempt),
        span=span,
        gpus=job.total_gpus,
        total_gpu_hours=total,
        threshold_percent=_threshold(job),
        mfu=[y for _, y in _points(attempt.pk, COMPUTED_MFU)],  # a fraction; a printed one may be %
        memory_total_mib=memory_total_for(job.cluster.gpu_model),
        declared_pause_seconds=declared_pause_seconds(
            progress, span.end if lost_from is None else min(lost_from, span.end)
        )
        if declared_pauses is None
        else declared_pauses,
        hung_seconds=_hung_seconds(progress, span.end) if hung_seconds is None else hung_seconds,
    )
    data = {
        **card.as_json(),
        "attempt": attempt.number,
        "resumed_step": resumed_step,
        "lost_from": lost_from,
        "span": {"start": span.start, "end": span.end, "first_step": span.first_step},
    }
    stored, _ = EfficiencyCard.objects.update_or_create(
        attempt=attempt,
        defaults={
            "data": data,
            "from_ledger": charge is not None,
            "ended_at": end,
            "gpu_hours": card.gpu_hours,
            "queued_gpu_hours": card.queued_gpu_hours,
            **{f"{part}_gpu_hours": card.parts[part] for part in PARTS},
        },
    )
    run_summary_finish(attempt=attempt)
    return stored


def efficiency_cards_refresh() -> int:
    """Cards of ended attempts still missing, or computed before their ledger charge existed."""
    recent = timezone.now() - REFRESH_WITHIN
    missing = (
        Attempt.objects.filter(
            state__in=FINAL_STATES,
            files_complete=True,
            diagnosed_at__isnull=False,
            started_at__isnull=False,
            ended_at__gte=recent,
        )
        .filter(~Exists(EfficiencyCard.objects.filter(attempt=OuterRef("pk"))))
        .order_by("pk")
    )
    stale = Attempt.objects.filter(
        efficiency__from_ledger=False,
        pk__in=UsageCharge.objects.values("attempt_id"),
    ).order_by("pk")
    count = 0
    for attempt in [*missing[:REFRESH_BATCH], *stale[:REFRESH_BATCH]]:
        try:
            count += attempt_card_compute(attempt=attempt) is not None
        except Exception:  # one attempt's card must not stop the others'
            logger.exception("efficiency card of attempt %s failed", attempt.pk)
    return count
