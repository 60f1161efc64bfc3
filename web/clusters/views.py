"""The cluster pages: the list, and one cluster's partitions, nodes and queue.

Slurm's figures come from the shared cached status (clusters.status); the queue is
the portal's own view of the jobs there that the viewer may see (jobs.queue.cluster: every
project's for staff), split into the projects' lines, Slurm's pending jobs with its reasons
in plain words, and the rest; the wait history is the portal's own records of the last
week (jobs.queue.waits). Who may see a cluster is a quota rule (projects.access).
"""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from clusters.access import can_check_readiness
from clusters.models import Cluster
from clusters.onboarding.checks import Check
from clusters.onboarding.selectors import latest_readiness
from clusters.status import ClusterStatus, cached_cluster_status, cluster_status
from jobs.queue.cluster import MAX_QUEUE_ROWS, cluster_queue, queue_parts
from jobs.queue.waits import RECENT_WINDOW, PartitionWaits, recent_waits_by_partition
from portal_lib.viewers import sees_everything
from projects.access import clusters_for_user
from web.auth import request_user


def _cluster_for(request: HttpRequest, name: str) -> Cluster:
    cluster = clusters_for_user(user=request_user(request)).filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster, or none of your projects may use it.")
    return cluster


@login_required
@require_GET
def cluster_list(request: HttpRequest) -> HttpResponse:
    """The clusters the user's projects may use, with the last status read (then fresh)."""
    clusters = list(clusters_for_user(user=request.user))
    rows = [(cluster, cached_cluster_status(cluster)) for cluster in clusters]
    return render(request, "clusters/list.html", {"clusters": rows})


@login_required
@require_GET
def cluster_page(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster_for(request, name)
    status = cluster_status(cluster=cluster)
    queue, more = cluster_queue(user=request.user, cluster=cluster)
    waits = recent_waits_by_partition(
        cluster_id=cluster.pk, now=timezone.now(), default_partition=_default_partition(status)
    )
    staff = can_check_readiness(user=request.user)
    readiness = latest_readiness(cluster=cluster) if staff else None
    return render(
        request,
        "clusters/detail.html",
        {
            "cluster": cluster,
            "status": status,
            "queue": queue_parts(queue),
            "queue_more": more,
            "queue_cap": MAX_QUEUE_ROWS,
            "sees_every_project": sees_everything(request.user),
            "waits": waits,
            "waits_days": RECENT_WINDOW.days,
            "waits_chart": _waits_chart(waits),
            "can_check_readiness": staff,
            "readiness": readiness,
            "readiness_checks": [Check.from_json(c) for c in readiness.checks] if readiness else [],
        },
    )


def _default_partition(status: ClusterStatus) -> str:
    return next((p.name for p in status.partitions if p.is_default), "")


def _waits_chart(waits: list[PartitionWaits]) -> dict[str, Any] | None:
    """What static/js/cluster-waits.js draws: each partition's waits (minutes) by submission."""
    if not any(w.points for w in waits):
        return None
    return {
        "partitions": [
            {
                "name": w.partition or "default partition",
                "x": [at.isoformat() for at, _ in w.points],
                "y": [round(seconds / 60, 2) for _, seconds in w.points],
            }
            for w in waits
        ]
    }


@login_required
@require_GET
def cluster_status_json(request: HttpRequest, name: str) -> JsonResponse:
    """The dashboard's free-GPU figures, filled in after the page loads."""
    cluster = _cluster_for(request, name)
    return JsonResponse(cluster_status(cluster=cluster).as_json())
