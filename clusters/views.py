"""The cluster page: partitions, nodes, GPUs and queue, from the shared cached status."""

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from clusters.models import Cluster
from clusters.status import cluster_status
from projects.models import Membership, Quota


def clusters_for_user(*, user: User) -> QuerySet[Cluster]:
    """Clusters one of the user's projects may use (a quota naming no clusters allows all)."""
    clusters = Cluster.objects.order_by("name")
    if user.is_staff:
        return clusters
    mine = Membership.objects.filter(user=user)
    unrestricted = mine.filter(
        Q(project__quota__isnull=True) | Q(project__quota__allowed_clusters__isnull=True)
    )
    allowed = Quota.allowed_clusters.through.objects.filter(
        quota__project__memberships__user=user, cluster_id=OuterRef("pk")
    )
    return clusters.filter(Q(Exists(unrestricted)) | Q(Exists(allowed)))


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
