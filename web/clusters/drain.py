"""The drain button of a node: staff only; the drain itself is `clusters.drain.node_drain`."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from clusters.access import can_drain
from clusters.drain import DrainError, node_drain
from clusters.models import Cluster


@login_required
@require_POST
def node_drain_view(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    if not can_drain(user=request.user):
        raise PermissionDenied("Only staff can drain nodes.")
    target = get_object_or_404(Cluster, name=cluster)
    try:
        node_drain(
            cluster=target, node=node, reason=request.POST.get("reason", ""), user=request.user
        )
    except DrainError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Node {node} of {target.name} is draining.")
    back = request.POST.get("next", "")
    if back and url_has_allowed_host_and_scheme(
        back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(back)
    return redirect("home")
