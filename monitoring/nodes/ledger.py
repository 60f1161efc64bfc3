"""The ledger's writes: an ended attempt's word on its nodes, the nodes' new scores and
verdicts, and a bad node's avoidance (clusters.avoidance) with an alert to staff."""

import logging
from collections import Counter
from collections.abc import Sequence
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from clusters.avoidance import node_avoid, node_clears
from clusters.models import Cluster
from jobs.models import Attempt
from monitoring.models import NodeEvent, NodeHealth, NodeSignal
from monitoring.nodes.observed import observed_blames
from monitoring.nodes.score import BAD, ScorePolicy, Signal, node_score, verdict
from monitoring.nodes.signals import attempt_word

logger = logging.getLogger(__name__)

# Signals older than this many half-lives weigh under 0.1 %: not read.
_HALF_LIVES_READ = 10


def score_policy() -> ScorePolicy:
    return ScorePolicy(
        half_life_hours=settings.NODE_SCORE_HALF_LIFE_HOURS,
        healthy_factor=settings.NODE_HEALTHY_JOB_FACTOR,
        suspect=settings.NODE_SUSPECT_SCORE,
        bad=settings.NODE_BAD_SCORE,
        bad_min_users=settings.NODE_BAD_MIN_USERS,
    )


def signal_users(events: list[NodeEvent]) -> int:
    """How many people's jobs the events came from."""
    return len({e.attempt.job.user_id for e in events if e.attempt is not None})


def node_signals(
    *, cluster: Cluster, node: str, now: datetime, since: datetime | None
) -> list[NodeEvent]:
    """The node's blaming events that still count: recent enough, after an admin's clear."""
    oldest = now - timedelta(hours=settings.NODE_SCORE_HALF_LIFE_HOURS * _HALF_LIVES_READ)
    if since is not None and since > oldest:
        oldest = since
    return list(
        NodeEvent.objects.filter(cluster=cluster, node=node, at__gte=oldest, weight__gt=0)
        .select_related("attempt__job")
        .order_by("-at", "-id")
    )


def _reason(events: list[NodeEvent], score: float) -> str:
    """Why the node is avoided, as every job's page shows it: no other person's jobs named."""
    counts = Counter(NodeSignal(e.kind).label for e in events)
    what = ", ".join(f"{n} x {label}" for label, n in counts.most_common())
    return f"judged bad (score {score:.1f}): {what}"


def _alert_staff(cluster: Cluster, node: str, reason: str, events: list[NodeEvent]) -> None:
    """Mail the staff with an address, after the commit, naming the evidence jobs."""
    logger.warning("node %s of cluster %s turned bad: %s", node, cluster.name, reason)
    addresses = list(
        get_user_model()
        .objects.filter(is_staff=True, is_active=True)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    if not addresses:
        return
    jobs = sorted({e.attempt.job_id for e in events if e.attempt is not None})
    subject = f"[portal] node {node} of {cluster.name} is bad and avoided"
    body = (
        f"Node {node} of cluster {cluster.name} was {reason}"
        + (f", in jobs {', '.join(f'#{j}' for j in jobs[-10:])}" if jobs else "")
        + ".\nNew submissions and restarts on the cluster leave it out for a while; "
        "see the cluster's nodes page to drain it, pin it or put it back."
    )
    transaction.on_commit(lambda: send_mail(subject, body, None, addresses, fail_silently=True))


def node_judge(*, cluster: Cluster, node: str, now: datetime | None = None) -> NodeHealth:
    """Score the node from its signals, store the verdict; a bad one is avoided (and staff
    told when that starts a new period)."""
    now = now or timezone.now()
    health, _ = NodeHealth.objects.get_or_create(cluster=cluster, node=node)
    events = node_signals(
        cluster=cluster, node=node, now=now, since=node_clears(cluster=cluster).get(node)
    )
    policy = score_policy()
    score = node_score(
        (Signal(e.weight, e.at, e.healthy_before) for e in events),
        now=now,
        healthy_jobs=health.healthy_jobs,
        policy=policy,
    )
    judged = verdict(score, policy, users=signal_users(events))
    changed = judged != health.verdict
    NodeHealth.objects.filter(pk=health.pk).update(
        score=score,
        verdict=judged,
        verdict_since=now if changed else health.verdict_since,
        updated_at=now,
    )
    health.score, health.verdict = score, judged
    if judged == BAD:
        reason = _reason(events, score)
        if node_avoid(cluster=cluster, node=node, reason=reason, now=now) is not None:
            _alert_staff(cluster, node, reason, events)
    return health


def _count_healthy(cluster: Cluster, nodes: Sequence[str], attempt: Attempt, at: datetime) -> None:
    """A healthy job for each node: one insert of events, one of new nodes, one update."""
    NodeEvent.objects.bulk_create(
        NodeEvent(cluster=cluster, node=n, kind=NodeSignal.HEALTHY, at=at, attempt=attempt)
        for n in nodes
    )
    NodeHealth.objects.bulk_create(
        (NodeHealth(cluster=cluster, node=n) for n in nodes), ignore_conflicts=True
    )
    NodeHealth.objects.filter(cluster=cluster, node__in=nodes).update(
        healthy_jobs=F("healthy_jobs") + 1
    )


def attempt_nodes_record(*, attempt: Attempt, cluster: Cluster) -> bool:
    """Record an ended attempt's word on its nodes once, and judge the nodes it touched.

    False when there was nothing to record or it was recorded already (by another poll).
    """
    word = attempt_word(attempt).adding(observed_blames(attempt))
    if not word.blames and not word.healthy:
        return False
    now = attempt.ended_at or timezone.now()
    weights = settings.NODE_SIGNAL_WEIGHTS
    try:
        with transaction.atomic():
            if word.healthy:
                _count_healthy(cluster, word.healthy, attempt, now)
            for blame in word.blames:
                health, _ = NodeHealth.objects.get_or_create(cluster=cluster, node=blame.node)
                NodeEvent.objects.create(
                    cluster=cluster,
                    node=blame.node,
                    kind=blame.kind,
                    weight=float(weights.get(blame.kind, 0.0)),
                    at=now,
                    attempt=attempt,
                    detail=blame.detail,
                    healthy_before=health.healthy_jobs,
                )
                NodeHealth.objects.filter(pk=health.pk).update(last_signal_at=now)
    except IntegrityError:
        return False  # recorded already: the word of an attempt counts once
    # A node never blamed stays healthy whatever it runs: only the others are judged again.
    judged = {b.node for b in word.blames} | set(
        NodeHealth.objects.filter(
            cluster=cluster, node__in=word.healthy, last_signal_at__isnull=False
        ).values_list("node", flat=True)
    )
    for node in sorted(judged):
        node_judge(cluster=cluster, node=node, now=now)  # as of the attempt's end
    return True
