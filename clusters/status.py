"""A cluster's live status (partitions, nodes, GPUs, queue), shared by every viewer.

One reader per cluster per interval: the first viewer past the interval takes a
cache lock (`cache.add`) and reads Slurm; the others get the last status at once,
or, when there is none yet, wait briefly for the reader's.
"""

import logging
import shlex
import time
from dataclasses import dataclass, field
from datetime import datetime

from django.core.cache import cache
from django.utils import timezone

from clusters.errors import ClusterError
from clusters.inventory import INVENTORY_TTL, partition_limits
from clusters.models import Cluster
from clusters.selectors import reader_endpoint
from clusters.slurm import Node, Partition, Slurm, squeue_argv, squeue_result
from clusters.ssh import pool

logger = logging.getLogger(__name__)

STATUS_INTERVAL = 15  # seconds a status counts as fresh
STATUS_KEEP = 600  # seconds a stale status is still shown while a new one is read
LOCK_SECONDS = 60  # longer than a read can take (three commands, 30 s timeout each)
WAIT_SECONDS = 10.0


def free_cpus(node: Node) -> int:
    """CPUs the scheduler could still give out on the node (none while it is down)."""
    return max(node.cpus - node.cpus_used, 0) if node.is_available else 0


def free_memory_mb(node: Node) -> int:
    return max(node.memory_mb - node.memory_used_mb, 0) if node.is_available else 0


@dataclass(frozen=True)
class PartitionStatus:
    name: str
    is_default: bool
    state: str
    max_time: str
    nodes: int
    gpus_total: int
    gpus_allocated: int
    gpus_free: int
    cpus_total: int = 0
    cpus_free: int = 0
    memory_total_mb: int = 0
    memory_free_mb: int = 0


@dataclass(frozen=True)
class ClusterStatus:
    cluster: str
    read_at: datetime | None
    partitions: list[PartitionStatus] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    pending_jobs: int = 0
    running_jobs: int = 0
    error: str = ""
    trust_warning: str = ""  # read through a user's own login: see Cluster.trust_warning

    @property
    def gpus_total(self) -> int:
        return sum(node.gpus for node in self.nodes)

    @property
    def gpus_allocated(self) -> int:
        return sum(min(node.gpus_used, node.gpus) for node in self.nodes)

    @property
    def gpus_free(self) -> int:
        return sum(node.free_gpus for node in self.nodes)

    @property
    def cpus_total(self) -> int:
        return sum(node.cpus for node in self.nodes)

    @property
    def cpus_free(self) -> int:
        return sum(free_cpus(node) for node in self.nodes)

    @property
    def memory_total_mb(self) -> int:
        return sum(node.memory_mb for node in self.nodes)

    @property
    def memory_free_mb(self) -> int:
        return sum(free_memory_mb(node) for node in self.nodes)

    def as_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster,
            "read_at": self.read_at.isoformat() if self.read_at else None,
            "gpus_total": self.gpus_total,
            "gpus_allocated": self.gpus_allocated,
            "gpus_free": self.gpus_free,
            "cpus_total": self.cpus_total,
            "cpus_free": self.cpus_free,
            "memory_total_mb": self.memory_total_mb,
            "memory_free_mb": self.memory_free_mb,
            "pending_jobs": self.pending_jobs,
            "running_jobs": self.running_jobs,
            "error": self.error,
            "trust_warning": self.trust_warning,
        }


def _key(cluster: Cluster) -> str:
    return f"clusters:status:{cluster.pk}"


def _describe(partition: Partition) -> str:
    if partition.max_time is None:
        return "unlimited"
    hours = partition.max_time.total_seconds() / 3600
    return f"{hours:g} h" if hours < 48 else f"{hours / 24:g} days"


def _summarise(
    cluster: Cluster, partitions: list[Partition], nodes: list[Node], states: list[str]
) -> ClusterStatus:
    rows = []
    for partition in partitions:
        members = [node for node in nodes if partition.name in node.partitions]
        rows.append(
            PartitionStatus(
                name=partition.name,
                is_default=partition.is_default,
                state=partition.state,
                max_time=_describe(partition),
                nodes=partition.total_nodes or len(members),
                gpus_total=sum(n.gpus for n in members),
                gpus_allocated=sum(min(n.gpus_used, n.gpus) for n in members),
                gpus_free=sum(n.free_gpus for n in members),
                cpus_total=sum(n.cpus for n in members),
                cpus_free=sum(free_cpus(n) for n in members),
                memory_total_mb=sum(n.memory_mb for n in members),
                memory_free_mb=sum(free_memory_mb(n) for n in members),
            )
        )
    return ClusterStatus(
        cluster=cluster.name,
        read_at=timezone.now(),
        partitions=rows,
        nodes=sorted(nodes, key=lambda n: n.name),
        pending_jobs=sum(1 for state in states if state == "PENDING"),
        running_jobs=sum(1 for state in states if state == "RUNNING"),
        trust_warning=cluster.trust_warning,
    )


def read_cluster_status(cluster: Cluster) -> ClusterStatus:
    """Three Slurm commands over one connection: partitions, nodes, the whole queue."""
    endpoint = reader_endpoint(cluster=cluster)
    if endpoint is None:
        return ClusterStatus(cluster=cluster.name, read_at=None, error="No account to read with.")
    try:
        with pool.session(endpoint) as connection:
            slurm = Slurm(connection, tools=cluster.slurm_tools)
            partitions = slurm.partitions()
            nodes = slurm.nodes()
            command = shlex.join(cluster.slurm_tools.wrap(squeue_argv()))
            result = slurm.connection.run(command, timeout=slurm.timeout)
            rows = squeue_result(result, command=command)
    except ClusterError as exc:
        logger.warning("cannot read the status of cluster %s: %s", cluster.name, exc)
        return ClusterStatus(
            cluster=cluster.name, read_at=timezone.now(), error=f"Cannot reach the cluster: {exc}"
        )
    # The partitions the submit form offers come from the same read.
    cache.set(
        f"clusters:partitions:{cluster.pk}", partition_limits(partitions, nodes), INVENTORY_TTL
    )
    return _summarise(cluster, partitions, nodes, [row.state for row in rows])


def cached_cluster_status(cluster: Cluster) -> ClusterStatus | None:
    """The last status read, fresh or not, without reading Slurm."""
    cached: ClusterStatus | None = cache.get(_key(cluster))
    return cached


def cached_cluster_statuses(clusters: list[Cluster]) -> dict[int, ClusterStatus]:
    """The last status read of each cluster that has one, by cluster id (one cache read)."""
    keys = {_key(cluster): cluster.pk for cluster in clusters}
    found = cache.get_many(list(keys))
    return {keys[key]: status for key, status in found.items() if isinstance(status, ClusterStatus)}


def _fresh(status: ClusterStatus | None) -> bool:
    if status is None or status.read_at is None:
        return False
    return (timezone.now() - status.read_at).total_seconds() < STATUS_INTERVAL


def cluster_status(*, cluster: Cluster) -> ClusterStatus:
    """The cluster's status, read at most once per STATUS_INTERVAL whoever asks."""
    key = _key(cluster)
    status = cached_cluster_status(cluster)
    if _fresh(status):
        assert status is not None  # noqa: S101 - _fresh checked it
        return status
    lock = f"{key}:lock"
    if cache.add(lock, "1", LOCK_SECONDS):
        try:
            status = read_cluster_status(cluster)
            cache.set(key, status, STATUS_KEEP)
        finally:
            cache.delete(lock)
        return status
    if status is not None:
        return status  # stale, while another viewer reads the new one
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
        status = cached_cluster_status(cluster)
        if status is not None:
            return status
    return ClusterStatus(
        cluster=cluster.name, read_at=None, error="The status is being read; reload in a moment."
    )
