"""The ledger's reads for the admin's nodes page: each node's score now, its verdict, the
jobs that blamed it, its avoidance, the GPU-hours its faults cost this month, and the
Slurm reason a drain would give."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings

from clusters.avoidance import avoided_nodes, node_clears
from clusters.models import AvoidedNode, Cluster
from monitoring.models import NodeEvent, NodeHealth, NodeSignal
from monitoring.nodes.ledger import score_policy, signal_users
from monitoring.nodes.score import BAD, HEALTHY, Signal, node_score, verdict

EVIDENCE_SHOWN = 5
# Slurm keeps a node's reason in a short field: the suggestion stays well under it.
DRAIN_REASON_CHARS = 120


@dataclass
class NodeRow:
    node: str
    score: float = 0.0
    verdict: str = HEALTHY
    healthy_jobs: int = 0
    avoided: AvoidedNode | None = None
    evidence: list[NodeEvent] = field(default_factory=list)
    signals: int = 0  # blaming events that still count
    gpu_hours_lost: float = 0.0  # this month, by attempts that blamed the node

    @property
    def drain_reason(self) -> str:
        """What a drain would tell Slurm (the node's reason), for a node worth draining."""
        if self.verdict != BAD and self.avoided is None:
            return ""
        kinds = sorted({NodeSignal(e.kind).label for e in self.evidence})
        jobs = sorted({e.attempt.job_id for e in self.evidence if e.attempt is not None})
        text = f"portal ledger: {self.signals} x {', '.join(kinds) or 'admin pin'}"
        if jobs:
            text += f", jobs {' '.join(f'#{j}' for j in jobs)}"
        return text[:DRAIN_REASON_CHARS]


def _gpu_hours(event: NodeEvent) -> float:
    attempt = event.attempt
    if attempt is None or attempt.started_at is None or attempt.ended_at is None:
        return 0.0
    hours = (attempt.ended_at - attempt.started_at).total_seconds() / 3600
    return max(hours, 0.0) * attempt.job.total_gpus


def cluster_node_rows(*, cluster: Cluster, now: datetime, month_start: datetime) -> list[NodeRow]:
    """Every node the ledger or an avoidance knows on the cluster, worst first (five queries)."""
    policy = score_policy()
    clears = node_clears(cluster=cluster)
    avoided = avoided_nodes(cluster=cluster, at=now)
    rows: dict[str, NodeRow] = {}
    for health in NodeHealth.objects.filter(cluster=cluster):
        rows[health.node] = NodeRow(node=health.node, healthy_jobs=health.healthy_jobs)
    oldest = min(now - timedelta(hours=settings.NODE_SCORE_HALF_LIFE_HOURS * 10), month_start)
    events = (
        NodeEvent.objects.filter(cluster=cluster, weight__gt=0, at__gte=oldest)
        .select_related("attempt__job")
        .order_by("-at", "-id")
    )
    counted: dict[str, list[Signal]] = defaultdict(list)
    counted_events: dict[str, list[NodeEvent]] = defaultdict(list)
    lost: set[tuple[str, int | None]] = set()
    for event in events:
        row = rows.setdefault(event.node, NodeRow(node=event.node))
        cleared = clears.get(event.node)
        # An attempt that blamed the node twice (a CUDA error and its ECC count) lost its
        # GPU-hours once.
        if event.at >= month_start and (event.node, event.attempt_id) not in lost:
            lost.add((event.node, event.attempt_id))
            row.gpu_hours_lost += _gpu_hours(event)
        if cleared is not None and event.at < cleared:
            continue
        counted[event.node].append(Signal(event.weight, event.at, event.healthy_before))
        counted_events[event.node].append(event)
        if len(row.evidence) < EVIDENCE_SHOWN:
            row.evidence.append(event)
    for node, period in avoided.items():
        rows.setdefault(node, NodeRow(node=node)).avoided = period
    for row in rows.values():
        signals = counted.get(row.node, [])
        row.signals = len(signals)
        row.score = node_score(signals, now=now, healthy_jobs=row.healthy_jobs, policy=policy)
        users = signal_users(counted_events.get(row.node, []))
        row.verdict = verdict(row.score, policy, users=users)
    return sorted(rows.values(), key=lambda r: (r.avoided is None, -r.score, r.node))


def month_start(now: datetime) -> datetime:
    """Where "this month" starts for the GPU-hours a node's faults cost."""
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


@dataclass(frozen=True)
class NodeLoss:
    cluster: Cluster
    row: NodeRow


def month_node_losses(*, now: datetime) -> list[NodeLoss]:
    """Every node whose faults cost GPU-hours this month, on any cluster, most first: the
    nodes pages' rows (one query, then the page's queries per cluster with such a node)."""
    start = month_start(now)
    blamed = NodeEvent.objects.filter(at__gte=start, at__lte=now, weight__gt=0)
    clusters = Cluster.objects.filter(pk__in=blamed.values("cluster_id")).order_by("name")
    losses = [
        NodeLoss(cluster, row)
        for cluster in clusters
        for row in cluster_node_rows(cluster=cluster, now=now, month_start=start)
        if row.gpu_hours_lost > 0
    ]
    return sorted(losses, key=lambda loss: (-loss.row.gpu_hours_lost, loss.cluster.name))
