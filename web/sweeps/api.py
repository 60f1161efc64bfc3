"""Sweeps over REST: list the caller's projects' sweeps, start one, read one with its trials.

Thin: a sweep is made by `sweeps.services.sweep_create`, with the form's checks and budget.
"""

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import Prefetch, QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.enums import TRIAL_TEMPLATES, Template
from jobs.specs import MAX_TIME_LIMIT
from portal_lib.bounds import INT_MAX
from sweeps.access import sweep_for_viewer, sweeps_visible_to
from sweeps.models import MAX_TRIALS_LIMIT, Sweep, Trial
from sweeps.services import sweep_create
from web.auth import request_user
from web.jobs.api import JobCursorPagination, submission_target
from web.jobs.code_api import CodeSnapshotSerializer, code_in_project
from web.jobs.inputs import CodeInputSerializer


class TrialSerializer(serializers.ModelSerializer[Trial]):
    last_step = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = Trial
        fields = [
            "number",
            "state",
            "params",
            "nodes",
            "job",
            "value",
            "last_step",
            "diverged",
            "note",
        ]


class SweepSerializer(serializers.ModelSerializer[Sweep]):
    project = serializers.CharField(source="project.slug", read_only=True)
    cluster = serializers.CharField(source="cluster.name", read_only=True)
    user = serializers.CharField(source="user.username", read_only=True)
    trials = TrialSerializer(many=True, read_only=True)
    code = CodeSnapshotSerializer(
        read_only=True, allow_null=True, help_text="The snapshot every trial runs from."
    )

    class Meta:
        model = Sweep
        fields = [
            "id",
            "name",
            "project",
            "cluster",
            "user",
            "state",
            "message",
            "created_at",
            "command",
            "nodes",
            "gpus_per_node",
            "time_limit",
            "space",
            "first_trials",
            "sampler",
            "pruner",
            "metric",
            "direction",
            "max_trials",
            "max_concurrent",
            "code",
            "code_commit",
            "code_branch",
            "code_git_url",
            "code_git_ref",
            "trials",
        ]


class SweepCreateSerializer(CodeInputSerializer):
    """Shapes and ranges; the search, the trials' spec and the budget are sweep_create's."""

    project = serializers.SlugField()
    cluster = serializers.CharField(max_length=64)
    name = serializers.CharField(max_length=128)
    template = serializers.ChoiceField(choices=TRIAL_TEMPLATES, default=Template.COMMAND)
    command = serializers.CharField(trim_whitespace=False)
    setup = serializers.CharField(required=False, allow_blank=True, default="")
    nodes = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    gpus_per_node = serializers.IntegerField(min_value=0, max_value=64, default=1)
    cpus_per_task = serializers.IntegerField(min_value=1, max_value=1024, default=1)
    memory_mb = serializers.IntegerField(
        min_value=1, max_value=INT_MAX, required=False, allow_null=True, default=None
    )
    time_limit = serializers.DurationField(
        default=timedelta(hours=1), min_value=timedelta(seconds=1), max_value=MAX_TIME_LIMIT
    )
    partition = serializers.CharField(max_length=64, required=False, allow_blank=True, default="")
    space = serializers.JSONField(help_text='e.g. {"lr": {"type": "float", "low": 1e-4, ...}}')
    first_trials = serializers.JSONField(required=False, default=None)
    sampler = serializers.ChoiceField(choices=Sweep.Sampler.choices, default=Sweep.Sampler.TPE)
    seed = serializers.IntegerField(min_value=0, max_value=INT_MAX, default=0)
    pruner = serializers.ChoiceField(choices=Sweep.Pruner.choices, default=Sweep.Pruner.MEDIAN)
    metric = serializers.CharField(max_length=200, default="loss")
    direction = serializers.ChoiceField(
        choices=Sweep.Direction.choices, default=Sweep.Direction.MINIMIZE
    )
    report_every = serializers.IntegerField(min_value=1, max_value=INT_MAX, default=10)
    warmup_steps = serializers.IntegerField(min_value=1, max_value=INT_MAX, default=10)
    startup_trials = serializers.IntegerField(min_value=0, max_value=MAX_TRIALS_LIMIT, default=2)
    max_trials = serializers.IntegerField(min_value=1, max_value=MAX_TRIALS_LIMIT)
    max_concurrent = serializers.IntegerField(min_value=1, max_value=MAX_TRIALS_LIMIT, default=2)


def sweeps_listed(*, user: User) -> QuerySet[Sweep]:
    return (
        sweeps_visible_to(user=user)
        .select_related("project", "cluster", "user", "code")
        .prefetch_related(Prefetch("trials", Trial.objects.order_by("number")))
    )


class SweepListCreateView(generics.GenericAPIView[Sweep]):
    pagination_class = JobCursorPagination

    def get_queryset(self) -> QuerySet[Sweep]:
        return sweeps_listed(user=request_user(self.request))

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        return SweepCreateSerializer if self.request.method == "POST" else SweepSerializer

    @extend_schema(operation_id="sweeps_list", responses=SweepSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Sweeps of your projects, newest first, with their trials."""
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(SweepSerializer(page, many=True).data)

    @extend_schema(
        operation_id="sweeps_create",
        request=SweepCreateSerializer,
        responses={201: SweepSerializer},
    )
    def post(self, request: Request) -> Response:
        """Start a sweep: the form's checks, its whole GPU-hours against the budget."""
        data = SweepCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        values["first_trials"] = values.get("first_trials") or []
        user = request_user(request)
        project, cluster = submission_target(user=user, values=values)
        if values["code"] is not None:
            values["code"] = code_in_project(user=user, project=project, sha256=values["code"])
        sweep = sweep_create(user=user, sweep=Sweep(project=project, cluster=cluster, **values))
        return Response(SweepSerializer(sweep).data, status=status.HTTP_201_CREATED)


class SweepDetailView(APIView):
    @extend_schema(operation_id="sweeps_retrieve", responses=SweepSerializer)
    def get(self, request: Request, sweep_id: int) -> Response:
        """One sweep of your projects, with its trials."""
        sweep = sweep_for_viewer(user=request.user, sweep_id=sweep_id)
        if sweep is None:
            raise NotFound()
        return Response(SweepSerializer(sweep).data)
