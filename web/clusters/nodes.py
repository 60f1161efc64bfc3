"""The admin's nodes page of a cluster: the ledger's verdicts, evidence jobs, avoidance,
and the staff's drain, pin and clear; staff only, as draining is."""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from clusters.access import can_drain
from clusters.avoidance import node_avoid_clear, node_avoid_pin
from clusters.models import Cluster
from monitoring.nodes.selectors import cluster_node_rows, month_start


def _staff_cluster(request: HttpRequest, name: str) -> Cluster:
    if not can_drain(user=request.user):
        raise PermissionDenied("Only staff see a cluster's node health.")
    return get_object_or_404(Cluster, name=name)


@login_required
@require_GET
def cluster_nodes_page(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _staff_cluster(request, name)
    now = timezone.now()
    start = month_start(now)
    rows = cluster_node_rows(cluster=cluster, now=now, month_start=start)
    return render(
        request,
        "clusters/nodes.html",
        {"cluster": cluster, "rows": rows, "month_start": start, "now": now},
    )


def _node_action(
    request: HttpRequest, cluster: Cluster, verb: str, act: Callable[[], object], done: str
) -> HttpResponse:
    try:
        act()
    except ValueError as exc:
        messages.error(request, f"Cannot {verb}: {exc}.")
    else:
        messages.success(request, done)
    return redirect("cluster-nodes", name=cluster.name)


@login_required
@require_POST
def node_pin_view(request: HttpRequest, cluster: str, node: str = "") -> HttpResponse:
    """Pin the node of the URL, or the one the form names."""
    target = _staff_cluster(request, cluster)
    node = node or request.POST.get("node", "").strip()
    reason = request.POST.get("reason", "")
    return _node_action(
        request,
        target,
        "pin",
        lambda: node_avoid_pin(cluster=target, node=node, reason=reason, user=request.user),
        f"Node {node} is left out of new jobs until you clear it.",
    )


@login_required
@require_POST
def node_clear_view(request: HttpRequest, cluster: str, node: str) -> HttpResponse:
    target = _staff_cluster(request, cluster)
    return _node_action(
        request,
        target,
        "clear",
        lambda: node_avoid_clear(cluster=target, node=node, user=request.user),
        f"Node {node} is back: the ledger starts it afresh.",
    )
