"""Idle GPUs: a running attempt whose GPUs all stay under its project's threshold is warned, then
cancelled if the project's policy says so.

The evidence is the attempt's own GPU samples, as the poll stored them from its own
sampler files (`monitoring.ingest.gpu`: its nodes, its GPU indexes only). A tenant
can fake them only for their own job: faking idle GPUs cancels nothing but their
own attempt, faking busy ones keeps their own project paying. The ladder's times
are the portal's; the idle stretch is measured on the samples' own clock.

A JupyterLab session is idle only when its kernels run nothing too: before it is
warned or cancelled, its server is asked (monitoring.goodput.kernels), by a task outside
the poll; until the answer is in, the warning or cancel waits. That answer can only hold
the ladder back, never make GPUs count as busy.
"""

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from jobs.enums import State, Template
from jobs.models import Attempt
from jobs.rundir import gpu_series
from jobs.services import attempt_cancel_by_portal
from jobs.states import attempt_note
from monitoring.goodput.kernels import kernels_ask_queue, kernels_verdict
from monitoring.models import AttemptActivity
from monitoring.series.read import series_names, series_read
from portal_lib.queueing import queue_on_commit
from projects.models import IdlePolicy

logger = logging.getLogger(__name__)

SEND_IDLE_WARNING = "monitoring.tasks.send_idle_warning_mail"
UTILIZATION = "utilization"
MAX_NEW_SAMPLES = 100_000  # per series and poll; far more than a poll brings
# Queues one ask of a session's server: (attempt id, window, now).
KernelAsk = Callable[..., object]


@dataclass
class IdleState:
    """Since when (sample clock) all GPUs are under the threshold; None while any is busy."""

    since_x: float | None = None
    last_x: float | None = None
    checked: dict[str, float] = field(default_factory=dict)  # per series, the last x seen


@dataclass(frozen=True)
class Rule:
    threshold_percent: int
    warn_after: timedelta
    cancel_after: timedelta | None


def idle_advance(
    state: IdleState, samples: Mapping[str, Sequence[tuple[float, float]]], threshold: float
) -> IdleState:
    """Take new samples of every GPU in time order: one busy sample ends the idle stretch."""
    merged = sorted(
        (x, y)
        for name, points in samples.items()
        for x, y in points
        if x > state.checked.get(name, -1)
    )
    checked = dict(state.checked)
    for name, points in samples.items():
        if points:
            checked[name] = max(checked.get(name, -1), max(x for x, _ in points))
    since, last = state.since_x, state.last_x
    for x, y in merged:
        if y >= threshold:
            since = None
        elif since is None:
            since = x
        last = x if last is None else max(last, x)
    return IdleState(since_x=since, last_x=last, checked=checked)


def idle_action(
    *,
    state: IdleState,
    rule: Rule,
    warned_at: datetime | None,
    cancel_at: datetime | None,
    now: datetime,
) -> str | None:
    """`warn`, `cancel`, `clear` (busy again after a warning) or None."""
    if state.since_x is None or state.last_x is None:
        return "clear" if warned_at is not None else None
    idle_for = state.last_x - state.since_x
    if warned_at is None:
        return "warn" if idle_for >= rule.warn_after.total_seconds() else None
    if rule.cancel_after is None or cancel_at is None:
        return None
    long_enough = idle_for >= (rule.warn_after + rule.cancel_after).total_seconds()
    return "cancel" if long_enough and now >= cancel_at else None


def _new_samples(
    attempt: Attempt, checked: dict[str, float]
) -> dict[str, list[tuple[float, float]]]:
    names = [
        n
        for n in series_names(attempt_id=attempt.pk)
        if (g := gpu_series(n)) and g.metric == UTILIZATION
    ]
    out = {}
    for name in names:
        data = series_read(
            attempt_id=attempt.pk, name=name, x_from=checked.get(name), max_points=MAX_NEW_SAMPLES
        )
        out[name] = list(zip(data.xs, data.ys, strict=True))
    return out


def _session_action(
    *, attempt: Attempt, action: str, rule: Rule, now: datetime, ask: KernelAsk
) -> str | None:
    """A session's warning or cancel holds only if its kernels ran nothing in that window too;
    kernels that did hold back a warning, and lift one given. Without an answer yet, the
    server is asked outside the poll and the action waits for it."""
    window = rule.warn_after
    if action == "cancel":
        window += rule.cancel_after or timedelta()
    ran = kernels_verdict(attempt_id=attempt.pk, window=window)
    if ran is None:
        ask(attempt_id=attempt.pk, window=window, now=now)
        return None
    if ran:
        return None if action == "warn" else "clear"
    return action


def _warning(rule: Rule, cancel_at: datetime | None, *, session: bool) -> str:
    text = (
        f"GPUs idle: every GPU of this attempt stayed under {rule.threshold_percent} % "
        f"utilisation for {rule.warn_after}"
    )
    text += ", and no kernel of the session ran anything." if session else "."
    if cancel_at is not None:
        text += f" It will be cancelled at {cancel_at:%Y-%m-%d %H:%M:%S} UTC if they stay idle."
    return text


def attempt_idle_check(
    *, attempt: Attempt, rule: Rule, now: datetime, ask: KernelAsk = kernels_ask_queue
) -> str | None:
    """Advance a running attempt's idle ladder by the samples the poll stored; the action.

    `ask` queues an ask of a session's server, what its kernels do (only a session's
    warning or cancel needs it); the poll itself never waits on the server."""
    activity, _ = AttemptActivity.objects.get_or_create(attempt=attempt)
    state = IdleState(activity.idle_since_x, activity.idle_last_x, dict(activity.gpu_checked))
    state = idle_advance(state, _new_samples(attempt, state.checked), rule.threshold_percent)
    action = idle_action(
        state=state, rule=rule, warned_at=activity.warned_at, cancel_at=activity.cancel_at, now=now
    )
    session = attempt.job.template == Template.JUPYTER
    if session and action in ("warn", "cancel"):
        action = _session_action(attempt=attempt, action=action, rule=rule, now=now, ask=ask)
    activity.idle_since_x, activity.idle_last_x = state.since_x, state.last_x
    activity.gpu_checked = state.checked
    activity.threshold_percent = rule.threshold_percent
    if action == "warn":
        activity.warned_at = now
        activity.cancel_at = now + rule.cancel_after if rule.cancel_after else None
        warning = _warning(rule, activity.cancel_at, session=session)
        attempt_note(attempt=attempt, reason=warning, at=now)
        queue_on_commit(SEND_IDLE_WARNING, attempt.pk)
    elif action == "clear":
        activity.warned_at = activity.cancel_at = None
        why = "GPUs busy again" if state.since_x is None else "A kernel of the session ran"
        attempt_note(attempt=attempt, reason=f"{why}: the idle warning is lifted.", at=now)
    elif action == "cancel":
        idle_for = rule.warn_after + (rule.cancel_after or timedelta())
        reason = (
            f"Cancelled by the project's idle-GPU policy: every GPU stayed under "
            f"{rule.threshold_percent} % for {idle_for}"
        )
        reason += ", and no kernel of the session ran anything." if session else "."
        if attempt_cancel_by_portal(attempt=attempt, reason=reason):
            activity.cancelled_at = now
    activity.save()
    return action


def idle_watch(attempts: Sequence[Attempt]) -> None:
    """Check every running attempt of a project with an idle policy (one query for the policies)."""
    running = [
        a
        for a in attempts
        if a.state == State.RUNNING and a.job.gpus_per_node and a.cancel_requested_at is None
    ]
    if not running:
        return
    policies = {
        p.project_id: p
        for p in IdlePolicy.objects.filter(project_id__in={a.job.project_id for a in running})
    }
    now = timezone.now()
    for attempt in running:
        policy = policies.get(attempt.job.project_id)
        if policy is None:
            continue
        rule = Rule(policy.threshold_percent, policy.warn_after, policy.cancel_after)
        try:
            with transaction.atomic():
                attempt_idle_check(attempt=attempt, rule=rule, now=now)
        except Exception:  # one attempt's check must not stop the others'
            logger.exception("idle check of attempt %s failed", attempt.pk)


def idle_warning_send(*, attempt_id: int) -> int:
    """Mail the submitter that their job's GPUs sit idle, with the ladder."""
    attempt = Attempt.objects.select_related("job", "job__user", "job__project").get(pk=attempt_id)
    activity = AttemptActivity.objects.filter(attempt=attempt).first()
    job = attempt.job
    if not job.user.email or activity is None or activity.warned_at is None:
        return 0  # busy again before the mail went out
    lines = [
        f"Your job {job.name} (#{job.pk}) in project {job.project.slug}, attempt "
        f"{attempt.number}, has GPUs that all stayed under {activity.threshold_percent} % "
        f"utilisation: warned at {activity.warned_at:%Y-%m-%d %H:%M:%S} UTC.",
        (
            f"It will be cancelled at {activity.cancel_at:%Y-%m-%d %H:%M:%S} UTC unless its "
            "GPUs get busy again."
            if activity.cancel_at
            else "Your project's policy does not cancel it; it is still charged while it runs."
        ),
        "If it waits for something on purpose, cancel it and resubmit when ready; see the job "
        "page for its GPU charts.",
    ]
    if job.template == Template.JUPYTER:
        lines.insert(
            2,
            "It is a JupyterLab session and none of its kernels ran anything in that time. "
            "If it is stopped, what JupyterLab saved stays in its working directory.",
        )
    subject = f"[portal] Job {job.name} (#{job.pk}): GPUs idle"
    return send_mail(
        subject, "\n".join(lines) + "\n", settings.DEFAULT_FROM_EMAIL, [job.user.email]
    )
