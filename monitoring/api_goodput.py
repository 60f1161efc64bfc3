"""REST read of a job's goodput: each ended attempt's efficiency card and the idle ladder."""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.access import job_for_viewer
from monitoring.goodput_selectors import idle_ladder, job_efficiency


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
