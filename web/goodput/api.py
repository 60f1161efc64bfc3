"""REST reads of goodput: a job's efficiency cards and idle ladder, a project's goodput by week."""

from datetime import date
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.access import job_for_viewer
from monitoring.goodput.report import GoodputRow, parse_iso_week, project_goodput
from monitoring.goodput.selectors import idle_ladder, job_efficiency
from projects.access import projects_visible_to


class GpuFiguresSerializer(serializers.Serializer[Any]):
    node = serializers.CharField()
    index = serializers.IntegerField()
    mean_util = serializers.FloatField(allow_null=True)
    p95_util = serializers.FloatField(allow_null=True)
    peak_memory_mib = serializers.FloatField(allow_null=True)
    energy_wh = serializers.FloatField(allow_null=True)
    idle_seconds = serializers.FloatField()


class PartSerializer(serializers.Serializer[Any]):
    part = serializers.CharField()
    title = serializers.CharField(source="label")
    gpu_hours = serializers.FloatField()
    share = serializers.FloatField(help_text="Of the attempt's charged GPU-hours.")


class BottleneckSerializer(serializers.Serializer[Any]):
    kind = serializers.CharField(help_text="input_bound, memory_bound, waiting_on_ranks or none.")
    finding = serializers.CharField()
    advice = serializers.CharField()


class CardSerializer(serializers.Serializer[Any]):
    attempt = serializers.IntegerField()
    from_ledger = serializers.BooleanField(help_text="GPU-hours are the ledger's charge.")
    gpus = serializers.IntegerField()
    gpu_hours = serializers.FloatField(help_text="What the parts sum to.")
    queued_gpu_hours = serializers.FloatField(help_text="Waiting in the queue: not charged.")
    rows = PartSerializer(many=True)
    per_gpu = GpuFiguresSerializer(many=True)
    mean_mfu = serializers.FloatField(allow_null=True)
    bottleneck = BottleneckSerializer(allow_null=True)
    threshold_percent = serializers.IntegerField(help_text="Under it, a GPU counts as idle.")
    resumed_step = serializers.IntegerField(
        allow_null=True, help_text="The step the next attempt resumed from."
    )


class IdleLadderSerializer(serializers.Serializer[Any]):
    attempt = serializers.IntegerField()
    threshold_percent = serializers.IntegerField()
    warn_after_seconds = serializers.FloatField()
    cancel_after_seconds = serializers.FloatField(allow_null=True)
    idle_for_seconds = serializers.FloatField(allow_null=True)
    warned_at = serializers.DateTimeField(allow_null=True)
    cancel_at = serializers.DateTimeField(allow_null=True)
    cancelled_at = serializers.DateTimeField(allow_null=True)


class JobEfficiencySerializer(serializers.Serializer[Any]):
    cards = CardSerializer(many=True)
    idle = IdleLadderSerializer(allow_null=True)


class JobEfficiencyView(APIView):
    @extend_schema(operation_id="job_efficiency", responses=JobEfficiencySerializer)
    def get(self, request: Request, job_id: int) -> Response:
        """Where each ended attempt's GPU-hours went, and the running attempt's idle ladder."""
        job = job_for_viewer(user=request.user, job_id=job_id)
        if job is None:
            raise NotFound()
        data = {"cards": job_efficiency(job=job), "idle": idle_ladder(job=job)}
        return Response(JobEfficiencySerializer(data).data)


class PartsSerializer(serializers.Serializer[Any]):
    """GPU-hours by part (monitoring.goodput.efficiency.PARTS)."""

    startup = serializers.FloatField()
    productive = serializers.FloatField()
    declared_pauses = serializers.FloatField()
    hung = serializers.FloatField()
    idle = serializers.FloatField()
    lost = serializers.FloatField()


class GoodputRowSerializer(serializers.Serializer[GoodputRow]):
    week = serializers.CharField(source="iso_week", help_text="ISO week of the attempts' end.")
    week_start = serializers.DateField(source="week", help_text="Its Monday.")
    attempts = serializers.IntegerField()
    gpu_hours = serializers.FloatField(help_text="Charged: what the parts sum to.")
    parts = PartsSerializer(help_text="GPU-hours by part.")
    goodput = serializers.FloatField(
        allow_null=True, help_text="Productive over charged GPU-hours; null: none charged."
    )
    queued_gpu_hours = serializers.FloatField(help_text="Waiting in the queue: not charged.")


class UserGoodputRowSerializer(GoodputRowSerializer):
    user = serializers.CharField()


class ProjectGoodputSerializer(serializers.Serializer[Any]):
    project = serializers.SlugField()
    first_week = serializers.CharField()
    last_week = serializers.CharField()
    weeks = GoodputRowSerializer(
        many=True, help_text="Newest first; weeks with no ended attempt are left out."
    )
    users = UserGoodputRowSerializer(many=True, help_text="Per week and user.")
    total = GoodputRowSerializer()


class ProjectGoodputQuerySerializer(serializers.Serializer[Any]):
    start = serializers.CharField(
        required=False, help_text="First ISO week (2026-W40); default 7 weeks before the last."
    )
    end = serializers.CharField(required=False, help_text="Last ISO week; default this one.")

    def _week(self, value: str) -> date:
        try:
            return parse_iso_week(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from exc

    def validate_start(self, value: str) -> date:
        return self._week(value)

    def validate_end(self, value: str) -> date:
        return self._week(value)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "start" in attrs and "end" in attrs and attrs["end"] < attrs["start"]:
            raise serializers.ValidationError(
                {"end": "The last week is before the first: swap them."}
            )
        return attrs


class ProjectGoodputView(APIView):
    @extend_schema(
        operation_id="project_goodput",
        responses=ProjectGoodputSerializer,
        parameters=[ProjectGoodputQuerySerializer],
    )
    def get(self, request: Request, slug: str) -> Response:
        """The project's GPU-hours by part and goodput per ISO week and per user (the page's)."""
        project = projects_visible_to(user=request.user).filter(slug=slug).first()
        if project is None:
            raise NotFound()
        query = ProjectGoodputQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)  # a 400 naming each bad week
        weeks = query.validated_data
        report = project_goodput(
            project_id=project.pk, first=weeks.get("start"), last=weeks.get("end")
        )
        data = {
            "project": project.slug,
            "first_week": report.first_week,
            "last_week": report.last_week,
            "weeks": report.weeks,
            "users": report.users,
            "total": report.total,
        }
        return Response(ProjectGoodputSerializer(data).data)
