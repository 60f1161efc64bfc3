"""The cluster pages: the list, and one cluster's partitions, nodes and queue.

Slurm's figures come from the shared cached status (clusters.status); the queue is
the portal's own view of the jobs there that the viewer may see (jobs.queue.cluster). Who
may see a cluster is a quota rule (projects.access).
"""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from clusters.access import can_check_readiness
from clusters.models import Cluster
from clusters.onboarding.checks import Check
from clusters.onboarding.selectors import latest_readiness
from clusters.status import cached_cluster_status, cluster_status
from jobs.queue.cluster import MAX_QUEUE_ROWS, cluster_queue
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
    staff = can_check_readiness(user=request.user)
    readiness = latest_readiness(cluster=cluster) if staff else None
    return render(
        request,
        "clusters/detail.html",
        {
            "cluster": cluster,
            "status": status,
            "queue": queue,
            "queue_more": more,
            "queue_cap": MAX_QUEUE_ROWS,
            "can_check_readiness": staff,
            "readiness": readiness,
            "readiness_checks": [Check.from_json(c) for c in readiness.checks] if readiness else [],
        },
    )


@login_required
@require_GET
def cluster_status_json(request: HttpRequest, name: str) -> JsonResponse:
    """The dashboard's free-GPU figures, filled in after the page loads."""
    cluster = _cluster_for(request, name)
    return JsonResponse(cluster_status(cluster=cluster).as_json())
