"""An attempt handed to Slurm leaves out its cluster's avoided nodes (clusters.avoidance).

The nodes join the attempt's own `excluded_nodes` (a restart's failed node), the list the
batch script turns into `--exclude`: one path for every exclusion. As many as the job can
do without, never so many that it no longer fits; the timeline and the job page say which
were left out, and why, or why they were kept.
"""

import logging

from clusters.avoidance import (
    avoidance_fit,
    avoided_nodes,
    submission_avoidance_record,
    submission_avoidances,
)
from clusters.slurm import Partition, Slurm, SlurmError
from clusters.slurm.hostlist import expand_nodes
from jobs.models import Attempt
from jobs.states import attempt_note

logger = logging.getLogger(__name__)


def _nodes(value: str) -> list[str]:
    return [node for node in value.split(",") if node]


def own_exclusions(attempt: Attempt) -> list[str]:
    """The attempt's exclusions that are its job's own, not the cluster's avoided nodes."""
    record = submission_avoidances(attempt_uuids=[attempt.uuid]).get(attempt.uuid)
    avoided = set(record.nodes) if record else set()
    return [node for node in _nodes(attempt.excluded_nodes) if node not in avoided]


def _partition(partitions: list[Partition], name: str) -> Partition | None:
    for partition in partitions:
        if partition.name == name or (not name and partition.is_default):
            return partition
    return None


def _store(attempt: Attempt, excluded: list[str]) -> None:
    value = ",".join(excluded)
    if value != attempt.excluded_nodes:
        attempt.excluded_nodes = value
        Attempt.objects.filter(pk=attempt.pk).update(excluded_nodes=value)


def attempt_avoid_nodes(*, attempt: Attempt, slurm: Slurm) -> None:
    """Add the cluster's avoided nodes to the attempt's exclusions, before its script is
    written; a retried submission starts again from the attempt's own exclusions."""
    job = attempt.job
    before = submission_avoidances(attempt_uuids=[attempt.uuid]).get(attempt.uuid)
    own = [n for n in _nodes(attempt.excluded_nodes) if before is None or n not in before.nodes]
    avoided = avoided_nodes(cluster=job.cluster)
    if not avoided:
        _store(attempt, own)
        if before is not None:
            submission_avoidance_record(
                cluster=job.cluster, attempt_uuid=attempt.uuid, avoided={}, kept_note=""
            )
        return
    # Slurm's own partition list: which nodes the job can land on, and how many.
    try:
        partition = _partition(slurm.partitions(), job.partition)
    except SlurmError as exc:  # the submission goes on: Slurm still places the job
        logger.warning("attempt %s: no partitions, no node avoided: %s", attempt.pk, exc)
        partition = None
    if partition is None:
        _store(attempt, own)
        return
    fit = avoidance_fit(
        own=own,
        avoided={node: row.reason for node, row in avoided.items()},
        nodes_needed=job.nodes,
        partition=partition.name,
        partition_nodes=expand_nodes(partition.nodes),
    )
    _store(attempt, fit.excluded)
    submission_avoidance_record(
        cluster=job.cluster, attempt_uuid=attempt.uuid, avoided=fit.avoided, kept_note=fit.kept_note
    )
    if before is not None and (before.nodes, before.kept_note) == (fit.avoided, fit.kept_note):
        return  # a retried submission: the timeline said so on the first try
    if fit.avoided:
        why = "; ".join(f"{node}: {reason}" for node, reason in fit.avoided.items())
        attempt_note(attempt=attempt, reason=f"Submitted without avoided nodes ({why}).")
    if fit.kept_note:
        attempt_note(attempt=attempt, reason=fit.kept_note)
