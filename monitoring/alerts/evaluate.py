"""Evaluate the alert rules of the polled attempts' owners and projects, once per poll.

Called by the log watcher after it stored this poll's bytes and points. A few
queries per poll whatever the number of points: the rules, the attempts' state
rows, their progress verdicts, the alerts already fired. Delivery (mail,
webhook) is queued to Celery after the commit, never done here.
"""

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from jobs.models import Attempt
from jobs.rundir import gpu_series
from monitoring.alerts.rules import (
    AttemptView,
    Fire,
    nonfinite_pattern,
    nonfinite_series,
    recent_update,
    rule_fire,
)
from monitoring.logs.store import Stored
from monitoring.models import Alert, AlertKind, AlertRule, AlertState, AttemptProgress
from monitoring.models.alerts import ONCE_PER_ATTEMPT
from monitoring.series.points import Point
from portal_lib.queueing import queue_on_commit
from projects.models import Membership

logger = logging.getLogger(__name__)

DELIVER_ALERT = "monitoring.tasks.deliver_alert"
WINDOW_SECONDS = 3600


def alert_window(at: datetime) -> int:
    return int(at.timestamp() // WINDOW_SECONDS)


def rules_for(attempts: Sequence[Attempt]) -> dict[int, list[AlertRule]]:
    """Each attempt's enabled rules: its owner's own, and its project's owners' (one query)."""
    owners = {a.job.user_id for a in attempts}
    projects = {a.job.project_id for a in attempts}
    if not attempts:
        return {}
    rules = list(
        AlertRule.objects.filter(enabled=True).filter(
            Q(project__isnull=True, owner_id__in=owners)
            # A project's rule holds while its author still owns the project.
            | Q(
                project_id__in=projects,
                project__memberships__user_id=F("owner_id"),
                project__memberships__role=Membership.Role.OWNER,
            )
        )
    )
    out: dict[int, list[AlertRule]] = {}
    for attempt in attempts:
        job = attempt.job
        mine = [
            r
            for r in rules
            if r.project_id == job.project_id
            or (r.project_id is None and r.owner_id == job.user_id)
        ]
        if mine:
            out[attempt.pk] = mine
    return out


def alerts_evaluate(
    *,
    attempts: Iterable[Attempt],
    points: Sequence[Point] = (),
    stored: Sequence[Stored] = (),
    now: datetime | None = None,
) -> list[Alert]:
    """Fire what the rules say for these attempts; returns the alerts created."""
    now = now or timezone.now()
    by_id = {a.pk: a for a in attempts}
    rules = rules_for(list(by_id.values()))
    if not rules:
        return []
    watched = {a: [r.series for r in rs if r.kind in _SERIES_KINDS] for a, rs in rules.items()}
    drops = {
        a: [r.series for r in rs if r.kind == AlertKind.THROUGHPUT_DROP] for a, rs in rules.items()
    }
    new_points: dict[int, dict[str, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    gaps: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    last_x: dict[int, float] = {}
    for attempt_id, name, x, y in points:
        if attempt_id not in rules or gpu_series(name) is not None:
            continue  # a GPU sample's x is a time, not a step
        last_x[attempt_id] = max(x, last_x.get(attempt_id, x))
        if name in watched[attempt_id]:
            if math.isfinite(y):
                new_points[attempt_id][name].append((x, y))
            else:
                gaps[attempt_id][name].append(x)
    nonfinite = _nonfinite(rules, stored)
    states = {s.attempt_id: s for s in AlertState.objects.filter(attempt_id__in=list(rules))}
    verdicts = dict(
        AttemptProgress.objects.filter(
            attempt_id__in=[
                a for a, rs in rules.items() if any(r.kind == AlertKind.NO_PROGRESS for r in rs)
            ]
        ).values_list("attempt_id", "verdict")
    )
    fired = _fired(rules, by_id, now)
    created: list[Alert] = []
    updated_states = []
    for attempt_id, attempt_rules in rules.items():
        attempt = by_id[attempt_id]
        state = states.get(attempt_id) or AlertState(attempt_id=attempt_id)
        view = AttemptView(
            job_name=attempt.job.name,
            number=attempt.number,
            state=attempt.state,
            started_at=attempt.started_at,
            time_limit=attempt.job.time_limit,
            now=now,
            points=new_points.get(attempt_id, {}),
            gaps=gaps.get(attempt_id, {}),
            nonfinite=nonfinite.get(attempt_id, set()),
            recent=state.recent.get("series", {}) if isinstance(state.recent, dict) else {},
            last_x=last_x.get(
                attempt_id, state.recent.get("x") if isinstance(state.recent, dict) else None
            ),
            verdict=verdicts.get(attempt_id, ""),
        )
        for rule in attempt_rules:
            if _key(rule, attempt, now) in fired:
                continue
            fire = rule_fire(rule, view)
            if fire is not None:
                alert = alert_fire(rule=rule, attempt=attempt, fire=fire, now=now)
                if alert is not None:
                    created.append(alert)
        if drops[attempt_id] or attempt_id in last_x:
            state.recent = {
                "series": recent_update(view.recent, view.points, drops[attempt_id]),
                "x": view.last_x,
            }
            updated_states.append(state)
    if updated_states:
        AlertState.objects.bulk_create(
            updated_states,
            update_conflicts=True,
            unique_fields=["attempt"],
            update_fields=["recent"],
        )
    return created


_SERIES_KINDS = (AlertKind.LOSS_ABOVE, AlertKind.THROUGHPUT_DROP, AlertKind.LOSS_NONFINITE)


def _nonfinite(rules: dict[int, list[AlertRule]], stored: Sequence[Stored]) -> dict[int, set[str]]:
    names = {
        a: [r.series for r in rs if r.kind == AlertKind.LOSS_NONFINITE] for a, rs in rules.items()
    }
    out: dict[int, set[str]] = defaultdict(set)
    patterns = {a: nonfinite_pattern(n) for a, n in names.items() if n}
    for s in stored:
        attempt_id = s.log_file.attempt_id
        if attempt_id in patterns:
            out[attempt_id] |= nonfinite_series(patterns[attempt_id], s.data, names[attempt_id])
    return out


def alert_window_of(rule: AlertRule, attempt: Attempt, now: datetime) -> int:
    """The hour of `now`; for a state reached (started, ended), minus the attempt's id.

    The unique (rule, job, window) then keeps a condition to one alert per hour and
    a state to one per attempt, and a restart's "started" is not held back an hour.
    """
    if rule.kind in ONCE_PER_ATTEMPT:
        return -attempt.pk
    return alert_window(now)


def _key(rule: AlertRule, attempt: Attempt, now: datetime) -> tuple[int, int, int]:
    return (rule.pk, attempt.job_id, alert_window_of(rule, attempt, now))


def _fired(
    rules: dict[int, list[AlertRule]], by_id: dict[int, Attempt], now: datetime
) -> set[tuple[int, int, int]]:
    """The (rule, job, window) keys already taken among these (one query)."""
    rule_ids = {r.pk for rs in rules.values() for r in rs}
    jobs = {by_id[a].job_id for a in rules}
    rows = Alert.objects.filter(rule_id__in=rule_ids, job_id__in=jobs).filter(
        Q(window=alert_window(now)) | Q(window__lt=0)
    )
    return set(rows.values_list("rule_id", "job_id", "window"))


def alert_fire(*, rule: AlertRule, attempt: Attempt, fire: Fire, now: datetime) -> Alert | None:
    """Record the alert unless the database already holds it (another poll won the race)."""
    try:
        with transaction.atomic():
            alert = Alert.objects.create(
                rule=rule,
                kind=rule.kind,
                job_id=attempt.job_id,
                attempt=attempt,
                user_id=rule.owner_id,
                fired_at=now,
                window=alert_window_of(rule, attempt, now),
                message=fire.message[:500],
                at_x=fire.at_x,
            )
            if rule.to_mail or rule.webhook_url:
                queue_on_commit(DELIVER_ALERT, alert.pk)
    except IntegrityError:
        return None
    return alert
