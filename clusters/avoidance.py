"""Nodes a cluster's submissions leave out: the periods, the admin's pin and clear, and the
rule that keeps a job able to fit.

The node health ledger (monitoring.nodes) decides which nodes are bad and opens a period
here; jobs read the active periods when an attempt is handed to Slurm (jobs.avoidance)
and add those nodes to the attempt's `--exclude`. Each period is twice as long as the
node's previous one within the look-back, so a node that keeps failing stays out longer.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone

from clusters.access import can_drain
from clusters.models import AvoidedNode, Cluster, SubmissionAvoidance
from portal_lib.viewers import signed_in

# A Slurm node name as a node list carries it: no list syntax, no space.
NODE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _active(cluster: Cluster, at: datetime) -> "Q":
    return (
        Q(cluster=cluster, since__lte=at)
        & (Q(cleared_at__isnull=True) | Q(cleared_at__gt=at))
        & (Q(until__isnull=True) | Q(until__gt=at))
    )


def avoided_nodes(*, cluster: Cluster, at: datetime | None = None) -> dict[str, AvoidedNode]:
    """The cluster's nodes avoided at `at` (now), each with its period: a pinned one, else
    the latest (one query)."""
    at = at or timezone.now()
    found: dict[str, AvoidedNode] = {}
    for row in AvoidedNode.objects.filter(_active(cluster, at)).order_by("-since", "-id"):
        held = found.get(row.node)
        if held is None or (held.until is not None and row.until is None):
            found[row.node] = row
    return found


def node_clears(*, cluster: Cluster) -> dict[str, datetime]:
    """When an admin last cleared each node: the ledger forgets the evidence before it."""
    rows = (
        AvoidedNode.objects.filter(cluster=cluster, cleared_by__isnull=False)
        .values("node")
        .annotate(last=Max("cleared_at"))
    )
    return {row["node"]: row["last"] for row in rows}


def node_avoidance_history(*, cluster: Cluster, node: str, limit: int = 20) -> list[AvoidedNode]:
    return list(
        AvoidedNode.objects.filter(cluster=cluster, node=node)
        .select_related("pinned_by", "cleared_by")
        .order_by("-since", "-id")[:limit]
    )


def avoid_hours(previous_periods: int) -> float:
    """How long a node turning bad is left out, after this many periods in the look-back."""
    hours = settings.NODE_AVOID_HOURS * 2 ** min(previous_periods, 16)
    return float(min(hours, settings.NODE_AVOID_MAX_HOURS))


@transaction.atomic
def node_avoid(
    *, cluster: Cluster, node: str, reason: str, now: datetime | None = None
) -> AvoidedNode | None:
    """Start leaving `node` out of new submissions; None when it is avoided already."""
    now = now or timezone.now()
    # One writer per cluster at a time: two polls judging the same node open one period.
    Cluster.objects.select_for_update().filter(pk=cluster.pk).first()
    if node in avoided_nodes(cluster=cluster, at=now):
        return None
    lookback = now - timedelta(days=settings.NODE_AVOID_LOOKBACK_DAYS)
    previous = AvoidedNode.objects.filter(
        cluster=cluster, node=node, since__gte=lookback, pinned_by__isnull=True
    ).count()
    until = now + timedelta(hours=avoid_hours(previous))
    return AvoidedNode.objects.create(
        cluster=cluster, node=node, reason=reason, since=now, until=until
    )


def _staff(user: AbstractBaseUser | AnonymousUser, node: str) -> AbstractBaseUser:
    if not isinstance(user, AbstractBaseUser) or not (signed_in(user) and can_drain(user=user)):
        raise PermissionDenied("Only staff can pin or clear a node.")
    if not NODE_NAME.match(node):
        raise ValueError(f"{node!r} is not a node name (letters, digits, '_', '.', '-')")
    return user


@transaction.atomic
def node_avoid_pin(
    *, cluster: Cluster, node: str, reason: str, user: AbstractBaseUser | AnonymousUser
) -> AvoidedNode:
    """An admin leaves the node out until they clear it, whatever the ledger says."""
    staff = _staff(user, node)
    now = timezone.now()
    why = f"{reason.strip() or 'pinned'} (pinned by {staff.get_username()})"
    return AvoidedNode.objects.create(
        cluster=cluster, node=node, reason=why, since=now, until=None, pinned_by_id=staff.pk
    )


@transaction.atomic
def node_avoid_clear(*, cluster: Cluster, node: str, user: AbstractBaseUser | AnonymousUser) -> int:
    """An admin puts the node back: its periods end now, and the ledger starts it afresh."""
    staff = _staff(user, node)
    now = timezone.now()
    ended = AvoidedNode.objects.filter(_active(cluster, now), node=node).update(
        cleared_at=now, cleared_by_id=staff.pk
    )
    if not ended:  # a node never avoided (only suspect): the clear is recorded all the same
        AvoidedNode.objects.create(
            cluster=cluster,
            node=node,
            reason=f"cleared by {staff.get_username()}",
            since=now,
            until=now,
            cleared_at=now,
            cleared_by_id=staff.pk,
        )
    return ended


@dataclass(frozen=True)
class Fit:
    """What a submission leaves out: its own nodes, then avoided ones while the job fits."""

    excluded: list[str]
    avoided: dict[str, str]  # node -> why, the avoided nodes left out
    kept_note: str  # why avoided nodes were kept, or ""


def avoidance_fit(
    *,
    own: Sequence[str],
    avoided: Mapping[str, str],
    nodes_needed: int,
    partition: str,
    partition_nodes: Sequence[str],
) -> Fit:
    """Leave out the avoided nodes of the partition, in order, while `nodes_needed` still fit.

    A job needing N nodes of a partition of M is never left with fewer than N: at most
    M - N nodes are left out, its own exclusions (a restart's failed node) counted first.
    Avoided nodes outside the partition change nothing and are not named.
    """
    members = set(partition_nodes)
    excluded = list(own)
    room = len(members) - nodes_needed - len(members.intersection(own))
    candidates = [n for n in avoided if n in members and n not in excluded]
    taken = candidates[: max(room, 0)]
    kept = candidates[len(taken) :]
    excluded.extend(taken)
    note = ""
    if kept:
        note = (
            f"Node{'s' if len(kept) > 1 else ''} {', '.join(kept)} "
            f"{'are' if len(kept) > 1 else 'is'} judged bad but not left out: the job needs "
            f"{nodes_needed} of partition {partition}'s {len(members)} nodes, and leaving "
            "out more would leave too few."
        )
    return Fit(excluded=excluded, avoided={n: avoided[n] for n in taken}, kept_note=note)


def submission_avoidance_record(
    *, cluster: Cluster, attempt_uuid: UUID, avoided: Mapping[str, str], kept_note: str
) -> None:
    """What one submission left out; a retried submission replaces its first try's."""
    SubmissionAvoidance.objects.update_or_create(
        attempt_uuid=attempt_uuid,
        defaults={"cluster": cluster, "nodes": dict(avoided), "kept_note": kept_note},
    )


def submission_avoidances(*, attempt_uuids: Iterable[UUID]) -> dict[UUID, SubmissionAvoidance]:
    """Each submission's avoided nodes, by attempt UUID (one query)."""
    rows = SubmissionAvoidance.objects.filter(attempt_uuid__in=list(attempt_uuids))
    return {row.attempt_uuid: row for row in rows}
