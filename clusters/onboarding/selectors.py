"""Reads of the readiness reports."""

from clusters.models import Cluster, ReadinessReport


def latest_readiness(*, cluster: Cluster) -> ReadinessReport | None:
    """The cluster's newest report, running or done."""
    return ReadinessReport.objects.filter(cluster=cluster).select_related("requested_by").first()
