"""What a cluster offers (partitions, node sizes, GPUs), cached so viewers share one look-up."""

import contextlib
import logging
from dataclasses import dataclass
from datetime import timedelta

from django.core.cache import cache

from clusters.errors import ClusterError
from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_endpoint, portal_endpoint
from clusters.slurm import Node, Partition, Slurm
from clusters.ssh import pool
from portal_lib.cache import CACHE_DOWN

logger = logging.getLogger(__name__)

INVENTORY_TTL = 60  # seconds


@dataclass(frozen=True)
class PartitionLimits:
    """What one partition offers, from sinfo / scontrol on the cluster."""

    name: str
    is_default: bool
    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    memory_mb_per_node: int
    max_time: timedelta | None  # None: unlimited


def partition_limits(partitions: list[Partition], nodes: list[Node]) -> dict[str, PartitionLimits]:
    """Per partition, the largest node it has (a job asks for nodes of one size)."""
    limits: dict[str, PartitionLimits] = {}
    for partition in partitions:
        members = [node for node in nodes if partition.name in node.partitions]
        limits[partition.name] = PartitionLimits(
            name=partition.name,
            is_default=partition.is_default,
            nodes=partition.total_nodes or len(members),
            gpus_per_node=max((n.gpus for n in members), default=0),
            cpus_per_node=max((n.cpus for n in members), default=0),
            memory_mb_per_node=max((n.memory_mb for n in members), default=0),
            max_time=partition.max_time,
        )
    return limits


def cluster_partitions(*, cluster: Cluster, account: ClusterAccount) -> dict[str, PartitionLimits]:
    """The cluster's partitions, from cache or one sinfo/scontrol round; {} if unreachable.

    An unreachable cluster does not block a submission: the job waits in the
    portal's queue and Slurm itself refuses what does not fit.
    """
    key = f"clusters:partitions:{cluster.pk}"
    try:
        cached: dict[str, PartitionLimits] | None = cache.get(key)
    except CACHE_DOWN:  # the cache is a shortcut: without Redis, ask the cluster
        cached = None
    if cached is not None:
        return cached
    # The portal account when there is one: what a user's own session says is only a hint.
    endpoint = portal_endpoint(cluster=cluster) or account_endpoint(account=account)
    try:
        with pool.session(endpoint) as connection:
            slurm = Slurm(connection, tools=cluster.slurm_tools)
            limits = partition_limits(slurm.partitions(), slurm.nodes())
    except ClusterError as exc:
        logger.warning("cannot read the partitions of cluster %s: %s", cluster.name, exc)
        return {}
    with contextlib.suppress(*CACHE_DOWN):
        cache.set(key, limits, INVENTORY_TTL)
    return limits
