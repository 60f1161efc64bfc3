"""The cluster page's "Check readiness" button: staff only; the check runs in Celery
(clusters.onboarding) and the page shows its newest report."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from clusters.access import can_check_readiness
from clusters.models import Cluster
from clusters.onboarding.services import readiness_check_request
from portal_lib.errors import PortalError


@login_required
@require_POST
def cluster_readiness_view(request: HttpRequest, name: str) -> HttpResponse:
    if not can_check_readiness(user=request.user):
        raise PermissionDenied("Only staff can check a cluster's readiness.")
    cluster = get_object_or_404(Cluster, name=name)
    try:
        readiness_check_request(cluster=cluster, user=request.user)
    except PortalError as exc:  # the task queue is down: nothing was started
        messages.error(request, exc.message)
    else:
        messages.success(
            request,
            f"Readiness check of {cluster.name} started: test jobs run on its nodes; reload "
            "this page in a minute or two for the report.",
        )
    return redirect(reverse("cluster-page", args=[cluster.name]) + "#readiness")
