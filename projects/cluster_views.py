"""The cluster page: partitions, nodes, GPUs and queue, from the shared cached status.

Here rather than in clusters: who may see a cluster is a quota rule (projects.access).
"""

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from clusters.models import Cluster
from clusters.status import cluster_status
from projects.access import clusters_for_user


def _cluster_for(request: HttpRequest, name: str) -> Cluster:
    assert isinstance(request.user, User)  # noqa: S101 - behind login_required
    cluster = clusters_for_user(user=request.user).filter(name=name).first()
    if cluster is None:
        raise Http404("No such cluster, or none of your projects may use it.")
    return cluster


@login_required
@require_GET
def cluster_page(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster_for(request, name)
    status = cluster_status(cluster=cluster)
    return render(request, "clusters/detail.html", {"cluster": cluster, "status": status})


@login_required
@require_GET
def cluster_status_json(request: HttpRequest, name: str) -> JsonResponse:
    """The dashboard's free-GPU figures, filled in after the page loads."""
    cluster = _cluster_for(request, name)
    return JsonResponse(cluster_status(cluster=cluster).as_json())
