"""The portal's own health and each cluster's GPUs and queue, for /metrics.

Read from what is already kept: the poll and ingest figures in Redis
(`portal_lib.health`), the broker's queue lengths, the stream slots, each
cluster's last status read (the cache; /metrics never reaches a cluster) and the
portal's own live attempts (one aggregate query).
"""

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count, F, Sum
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from clusters.models import Cluster
from clusters.status import cached_cluster_statuses
from jobs.enums import LIVE_STATES, State
from jobs.models import Attempt
from jobs.poll.cycle import PARTS
from jobs.poll.health import PollFigures, poll_figures
from monitoring.ingest.figures import FILE_BYTES, GPU_SAMPLES, POINTS
from monitoring.live import slots
from monitoring.live.slots import slots_live
from portal_lib.health import health_read, redis_for

logger = logging.getLogger(__name__)

CLUSTER = ["cluster"]
# A poll's part (jobs.poll.cycle.PARTS): Slurm's view of the jobs, or their files.
CLUSTER_PART = ["cluster", "part"]
# kombu's Redis transport keeps a queue's messages of priority p under `<queue>\x06\x16<p>`
# (p > 0) beside the queue's own list; together they are its length.
_PRIORITY_SEP = "\x06\x16"
_PRIORITIES = (3, 6, 9)

# Name, kind, help, labels: one place for what this module serves (the board's test reads it).
HEALTH_FAMILIES = [
    ("portal_cluster_poll_duration_seconds", "summary", "Polls of the cluster.", CLUSTER_PART),
    (
        "portal_cluster_last_poll_duration_seconds",
        "gauge",
        "How long the cluster's last poll took.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_last_poll_timestamp_seconds",
        "gauge",
        "When the cluster's last poll ended.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_poll_lag_seconds",
        "gauge",
        "Seconds since the last poll of a cluster with live jobs ended.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_ssh_errors",
        "counter",
        "Cluster accounts a poll could not reach over SSH.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_poll_failures",
        "counter",
        "Polls (or accounts within one) that raised.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_accounts_delayed",
        "counter",
        "Cluster accounts a poll left out: their login was slow or printed past the cap.",
        CLUSTER_PART,
    ),
    (
        "portal_cluster_output_capped",
        "counter",
        "Cluster accounts whose agent call a poll cut at its output cap.",
        CLUSTER_PART,
    ),
    ("portal_ingest_points", "counter", "Training metric points stored.", []),
    ("portal_ingest_gpu_samples", "counter", "GPU sample values stored.", []),
    ("portal_ingest_bytes", "counter", "Bytes of run-directory files stored.", []),
    (
        "portal_redis_reachable",
        "gauge",
        "0 when Redis could not be read (poll, ingest, queue and stream figures not served).",
        [],
    ),
    ("portal_celery_queue_messages", "gauge", "Messages waiting in a Celery queue.", ["queue"]),
    ("portal_live_streams", "gauge", "Live streams open (SSE and WebSocket).", ["kind"]),
    ("portal_cluster_gpus", "gauge", "GPUs of the cluster's nodes (last status read).", CLUSTER),
    ("portal_cluster_gpus_allocated", "gauge", "GPUs Slurm has allocated.", CLUSTER),
    ("portal_cluster_gpus_free", "gauge", "GPUs free on available nodes.", CLUSTER),
    (
        "portal_cluster_slurm_pending_jobs",
        "gauge",
        "Jobs pending in Slurm's whole queue.",
        CLUSTER,
    ),
    (
        "portal_cluster_slurm_running_jobs",
        "gauge",
        "Jobs running in Slurm's whole queue.",
        CLUSTER,
    ),
    (
        "portal_cluster_status_timestamp_seconds",
        "gauge",
        "When the cluster's status shown was read.",
        CLUSTER,
    ),
    (
        "portal_cluster_status_error",
        "gauge",
        "1 when the last status read failed (its GPU figures are then not served).",
        CLUSTER,
    ),
    ("portal_cluster_pending_jobs", "gauge", "The portal's jobs pending on the cluster.", CLUSTER),
    ("portal_cluster_pending_gpus", "gauge", "GPUs the portal's pending jobs ask for.", CLUSTER),
    ("portal_cluster_running_jobs", "gauge", "The portal's jobs running on the cluster.", CLUSTER),
    ("portal_cluster_running_gpus", "gauge", "GPUs the portal's running jobs hold.", CLUSTER),
    (
        "portal_metrics_jobs_omitted",
        "gauge",
        "Running jobs left out of the per-job series by METRICS_MAX_JOBS.",
        [],
    ),
]
_KINDS = {
    "gauge": GaugeMetricFamily,
    "counter": CounterMetricFamily,
    "summary": SummaryMetricFamily,
}


# Any: the three kinds' add_metric differ (a summary's takes a count and a sum).
def health_shells() -> dict[str, Any]:
    return {
        name: _KINDS[kind](name, text, labels=labels)
        for name, kind, text, labels in HEALTH_FAMILIES
    }


_STATE_KEYS: dict[str, str] = {State.PENDING: "pending", State.RUNNING: "running"}


@dataclass(frozen=True)
class LiveCounts:
    """The portal's live attempts per cluster and state: jobs and GPUs."""

    by_cluster: dict[tuple[int, str], tuple[int, int]]

    def running(self) -> int:
        return sum(jobs for (_, state), (jobs, _) in self.by_cluster.items() if state == "running")


def live_counts() -> LiveCounts:
    """One aggregate query over the live attempts."""
    rows = (
        Attempt.objects.filter(state__in=LIVE_STATES)
        .values("job__cluster_id", "state")
        .annotate(jobs=Count("id"), gpus=Sum(F("job__nodes") * F("job__gpus_per_node")))
    )
    counts: dict[tuple[int, str], tuple[int, int]] = {}
    for row in rows:
        state = _STATE_KEYS.get(row["state"], "other")
        key = (row["job__cluster_id"], state)
        jobs, gpus = counts.get(key, (0, 0))
        counts[key] = (jobs + row["jobs"], gpus + (row["gpus"] or 0))
    return LiveCounts(by_cluster=counts)


def health_families(*, counts: LiveCounts, exported_jobs: int) -> Iterator[Metric]:
    """Every family of this module (one query for the clusters; Redis and the cache)."""
    families = health_shells()
    clusters = list(Cluster.objects.filter(is_active=True).only("id", "name"))
    _clusters(families, clusters, counts)
    try:
        figures = health_read()
        queues = celery_queue_lengths()
        live = {"sse": slots_live(kind=slots.SSE)}
        live["websocket"] = slots_live(kind=slots.WEBSOCKET)
    except redis.RedisError:
        # Counters read as zero would be a reset that never happened: serve none of them.
        logger.warning("cannot read the health figures from Redis", exc_info=True)
        families["portal_redis_reachable"].add_metric([], 0.0)
    else:
        families["portal_redis_reachable"].add_metric([], 1.0)
        _polls(families, clusters, figures, counts)
        for name, field in (
            ("portal_ingest_points", POINTS),
            ("portal_ingest_gpu_samples", GPU_SAMPLES),
            ("portal_ingest_bytes", FILE_BYTES),
        ):
            families[name].add_metric([], figures.get(field, 0.0))
        for queue, length in queues.items():
            families["portal_celery_queue_messages"].add_metric([queue], length)
        for kind, count in live.items():
            families["portal_live_streams"].add_metric([kind], count)
    omitted = max(counts.running() - exported_jobs, 0)
    families["portal_metrics_jobs_omitted"].add_metric([], omitted)
    yield from families.values()


def _polls(
    families: dict[str, Any],
    clusters: list[Cluster],
    figures: dict[str, float],
    counts: LiveCounts,
) -> None:
    now = time.time()
    live = {cluster_id for cluster_id, _ in counts.by_cluster}
    for cluster in clusters:
        for part in PARTS:
            _poll_part(
                families,
                poll_figures(figures, cluster_id=cluster.pk, part=part),
                [cluster.name, part],
                now=now,
                live=cluster.pk in live,
            )


def _poll_part(
    families: dict[str, Any], poll: PollFigures, label: list[str], *, now: float, live: bool
) -> None:
    families["portal_cluster_poll_duration_seconds"].add_metric(
        label, count_value=poll.polls, sum_value=poll.seconds
    )
    families["portal_cluster_ssh_errors"].add_metric(label, poll.ssh_errors)
    families["portal_cluster_poll_failures"].add_metric(label, poll.failures)
    families["portal_cluster_accounts_delayed"].add_metric(label, poll.delayed)
    families["portal_cluster_output_capped"].add_metric(label, poll.capped)
    if poll.last_seconds is not None:
        families["portal_cluster_last_poll_duration_seconds"].add_metric(label, poll.last_seconds)
    if poll.last_end is not None:
        families["portal_cluster_last_poll_timestamp_seconds"].add_metric(label, poll.last_end)
        if live:
            lag = max(now - poll.last_end, 0.0)
            families["portal_cluster_poll_lag_seconds"].add_metric(label, lag)


def _clusters(families: dict[str, Any], clusters: list[Cluster], counts: LiveCounts) -> None:
    statuses = cached_cluster_statuses(clusters)
    for cluster in clusters:
        label = [cluster.name]
        for state in ("pending", "running"):
            jobs, gpus = counts.by_cluster.get((cluster.pk, state), (0, 0))
            families[f"portal_cluster_{state}_jobs"].add_metric(label, jobs)
            families[f"portal_cluster_{state}_gpus"].add_metric(label, gpus)
        status = statuses.get(cluster.pk)
        if status is None or status.read_at is None:
            continue
        families["portal_cluster_status_timestamp_seconds"].add_metric(
            label, status.read_at.timestamp()
        )
        families["portal_cluster_status_error"].add_metric(label, 1.0 if status.error else 0.0)
        if status.error:
            continue  # a failed read has no nodes: zeros would read as an empty cluster
        families["portal_cluster_gpus"].add_metric(label, status.gpus_total)
        families["portal_cluster_gpus_allocated"].add_metric(label, status.gpus_allocated)
        families["portal_cluster_gpus_free"].add_metric(label, status.gpus_free)
        families["portal_cluster_slurm_pending_jobs"].add_metric(label, status.pending_jobs)
        families["portal_cluster_slurm_running_jobs"].add_metric(label, status.running_jobs)


def celery_queue_lengths() -> dict[str, float]:
    """Each Celery queue's waiting messages, where the broker is this Redis (else none)."""
    broker = settings.CELERY_BROKER_URL
    if not broker.startswith(("redis://", "rediss://")):
        return {}
    client = redis_for(broker)
    queue = getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery")
    keys = [queue, *(f"{queue}{_PRIORITY_SEP}{p}" for p in _PRIORITIES)]
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.llen(key)
    return {queue: float(sum(pipe.execute()))}
