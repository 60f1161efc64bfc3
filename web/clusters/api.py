"""Clusters over REST: what each offers (partitions) and how many GPUs are free now.

Here rather than in clusters: who may list clusters is a project rule (projects.access).
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from clusters.status import cluster_status
from projects.access import in_any_project


class PartitionSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    is_default = serializers.BooleanField()
    state = serializers.CharField()
    max_time = serializers.CharField(help_text="Longest time limit, e.g. '24 h' or 'unlimited'.")
    nodes = serializers.IntegerField()
    gpus_total = serializers.IntegerField()
    gpus_allocated = serializers.IntegerField()
    gpus_free = serializers.IntegerField()


class ClusterSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    gpu_model = serializers.CharField()
    price_per_gpu_hour = serializers.FloatField()
    price_per_cpu_hour = serializers.FloatField()
    partitions = PartitionSerializer(many=True)
    gpus_total = serializers.IntegerField()
    gpus_allocated = serializers.IntegerField()
    gpus_free = serializers.IntegerField()
    read_at = serializers.DateTimeField(
        allow_null=True, help_text="When Slurm was read; null if never."
    )
    error = serializers.CharField(help_text="Why the status could not be read; empty if it was.")


def _row(cluster: Cluster) -> dict[str, Any]:
    status = cluster_status(cluster=cluster)
    return {
        "name": cluster.name,
        "gpu_model": cluster.gpu_model,
        "price_per_gpu_hour": cluster.price_per_gpu_hour,
        "price_per_cpu_hour": cluster.price_per_cpu_hour,
        "partitions": status.partitions,
        "gpus_total": sum(p.gpus_total for p in status.partitions),
        "gpus_allocated": sum(p.gpus_allocated for p in status.partitions),
        "gpus_free": sum(p.gpus_free for p in status.partitions),
        "read_at": status.read_at,
        "error": status.error,
    }


class ClusterListView(APIView):
    @extend_schema(operation_id="clusters_list", responses=ClusterSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Clusters taking jobs, their partitions and free GPUs (read at most every few s)."""
        # Infrastructure, not a project's data; still only for people in a project.
        if not in_any_project(user=request.user):
            raise PermissionDenied("Clusters are listed for members of a project.")
        clusters = Cluster.objects.filter(is_active=True).order_by("name")
        return Response(ClusterSerializer([_row(c) for c in clusters], many=True).data)
