"""Projects over REST: the caller's projects, their role, the quota's usage and the code kept."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from projects.models import Membership
from projects.selectors import Usage, projects_usage
from projects.storage import CodeStorage, projects_code_storage


class MeterSerializer(serializers.Serializer[Any]):
    budget = serializers.FloatField(allow_null=True, help_text="Per period; null: no limit.")
    used = serializers.FloatField()
    reserved = serializers.FloatField(help_text="Held by queued and running jobs.")
    left = serializers.FloatField(allow_null=True, help_text="Null: no limit.")


class UsageSerializer(serializers.Serializer[Usage]):
    period = serializers.CharField()
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()
    budget_gpu_hours = serializers.FloatField()
    used_gpu_hours = serializers.FloatField()
    reserved_gpu_hours = serializers.FloatField(help_text="Held by queued and running jobs.")
    left_gpu_hours = serializers.FloatField()
    fraction_used = serializers.FloatField()
    has_quota = serializers.BooleanField()
    cpu_hours = MeterSerializer(source="cpu", help_text="CPU-hours (CPU-only jobs included).")
    node_hours = MeterSerializer(source="node", help_text="Node-hours.")


class CodeStorageSerializer(serializers.Serializer[CodeStorage]):
    used = serializers.IntegerField(help_text="Bytes of code snapshots the project keeps.")
    quota = serializers.IntegerField(help_text="Bytes it may keep.")
    left = serializers.IntegerField()


class ProjectSerializer(serializers.Serializer[Any]):
    slug = serializers.SlugField()
    name = serializers.CharField()
    description = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.choices, help_text="Your role.")
    usage = UsageSerializer()
    code_storage = CodeStorageSerializer()


def _rows(memberships: list[Membership]) -> list[dict[str, Any]]:
    usage = projects_usage(projects=[m.project for m in memberships])
    storage = projects_code_storage(projects=[m.project for m in memberships])
    return [
        {
            "slug": m.project.slug,
            "name": m.project.name,
            "description": m.project.description,
            "role": m.role,
            "usage": usage[m.project_id],
            "code_storage": storage[m.project_id],
        }
        for m in memberships
    ]


def _memberships(request: Request) -> Any:
    return Membership.objects.filter(user_id=request.user.pk or 0).select_related(
        "project", "project__quota"
    )


class ProjectListView(APIView):
    @extend_schema(operation_id="projects_list", responses=ProjectSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Your projects (any role), with this period's GPU-, CPU- and node-hour usage."""
        memberships = list(_memberships(request).order_by("project__slug"))
        return Response(ProjectSerializer(_rows(memberships), many=True).data)


class ProjectDetailView(APIView):
    @extend_schema(operation_id="projects_retrieve", responses=ProjectSerializer)
    def get(self, request: Request, slug: str) -> Response:
        """One of your projects."""
        membership = _memberships(request).filter(project__slug=slug).first()
        if membership is None:
            raise NotFound()
        return Response(ProjectSerializer(_rows([membership])[0]).data)
