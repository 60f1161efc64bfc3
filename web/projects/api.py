"""Projects over REST: the caller's projects, their role and the quota's usage."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from projects.models import Membership
from projects.selectors import Usage, projects_usage


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


class ProjectSerializer(serializers.Serializer[Any]):
    slug = serializers.SlugField()
    name = serializers.CharField()
    description = serializers.CharField()
    role = serializers.ChoiceField(choices=Membership.Role.choices, help_text="Your role.")
    usage = UsageSerializer()


def _rows(memberships: list[Membership]) -> list[dict[str, Any]]:
    usage = projects_usage(projects=[m.project for m in memberships])
    return [
        {
            "slug": m.project.slug,
            "name": m.project.name,
            "description": m.project.description,
            "role": m.role,
            "usage": usage[m.project_id],
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
