"""Jobs over REST: list, submit, detail, cancel, clone, attempts and events.

No business logic here: submissions and cancels go through jobs.services with
the same validation and quota checks as the form; reads go through selectors
that only ever return the caller's projects.
"""

import dataclasses
from typing import Any

from django.contrib.auth.models import User
from django.db.models import OuterRef, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import generics, serializers, status
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from jobs.access import job_for_viewer, jobs_visible_to, require_submitter
from jobs.models import Attempt, Job, JobEvent
from jobs.queue.line import jobs_waiting
from jobs.services import job_cancel, job_submit
from jobs.specs import CODE_FIELDS, JobSpec, spec_from_job
from projects.access import projects_of_member
from projects.models import Project
from web.auth import request_user
from web.jobs.code_api import CodeSnapshotSerializer, code_in_project
from web.jobs.inputs import JobCloneSerializer, JobCreateSerializer, JobFilterSerializer

# Fields another issue may add to Attempt (failure diagnosis) and Job (restart
# policy); shown when the model has them.
_ATTEMPT_EXTRA = ("failure_class", "diagnosis", "diagnosed_at", "excluded_nodes")
_JOB_EXTRA = (
    "max_restarts",
    "restart_on",
    "exclude_failed_nodes",
    "preflight",
    "hang_multiple",
    "hang_floor_seconds",
    "startup_window_seconds",
)


def _present(model: type[Any], names: tuple[str, ...]) -> list[str]:
    have = {field.name for field in model._meta.get_fields()}
    return [name for name in names if name in have]


# --- output -------------------------------------------------------------------------


class WaitingSerializer(serializers.Serializer[Any]):
    place = serializers.IntegerField(help_text="Place in the project's line; 1 is next.")
    line_length = serializers.IntegerField(help_text="Jobs waiting in the project's line.")
    words = serializers.CharField(help_text="The place, in words.")
    reason = serializers.CharField(help_text="Why the job waits, in words.")


class JobSerializer(serializers.ModelSerializer[Job]):
    project = serializers.SlugRelatedField[Project](slug_field="slug", read_only=True)
    cluster = serializers.SlugRelatedField[Cluster](slug_field="name", read_only=True)
    user = serializers.SlugRelatedField[User](slug_field="username", read_only=True)
    latest_attempt = serializers.IntegerField(
        read_only=True, allow_null=True, help_text="Number of the job's latest attempt."
    )
    output_complete = serializers.BooleanField(
        read_only=True,
        help_text="The latest attempt has ended and all it wrote has been read: until then "
        "an ended job's logs and metrics can still grow.",
    )
    code = CodeSnapshotSerializer(
        read_only=True, allow_null=True, help_text="The code snapshot the command runs in."
    )
    waiting = serializers.SerializerMethodField(
        help_text="A WAITING job's place in its project's line (1 is next), the line's "
        "length and why it waits, in words; null for any other state."
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "name",
            "project",
            "cluster",
            "user",
            "state",
            "template",
            "command",
            "nodes",
            "gpus_per_node",
            "cpus_per_task",
            "memory_mb",
            "time_limit",
            "partition",
            "setup",
            "model_params",
            "total_steps",
            "metric_patterns",
            "params",
            "param_sources",
            "note",
            "tags",
            "group",
            "parent",
            "parent_step",
            "parent_checkpoint",
            *_present(Job, _JOB_EXTRA),
            *CODE_FIELDS,
            "latest_attempt",
            "output_complete",
            "waiting",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    @extend_schema_field(WaitingSerializer(allow_null=True))
    def get_waiting(self, job: Job) -> dict[str, Any] | None:
        # A list passes every row's place in its context (jobs_waiting: one query per page).
        waiting = self.context.get("waiting")
        found = (waiting if waiting is not None else jobs_waiting([job])).get(job.pk)
        if found is None:
            return None
        return {
            "place": found.place.number,
            "line_length": found.place.length,
            "words": found.place.words,
            "reason": found.reason,
        }


class AttemptSerializer(serializers.ModelSerializer[Attempt]):
    if "failure_class" in _present(Attempt, _ATTEMPT_EXTRA):
        # Plain text: empty until an ended attempt is diagnosed.
        failure_class = serializers.CharField(
            read_only=True, help_text="Why the attempt failed, once diagnosed; empty before."
        )

    class Meta:
        model = Attempt
        fields = [
            "number",
            "state",
            "reason",
            "exit_code",
            "slurm_job_id",
            "node_list",
            "run_dir",
            "resume_from",
            "submitted_at",
            "started_at",
            "ended_at",
            "cancel_requested_at",
            *_present(Attempt, _ATTEMPT_EXTRA),
        ]
        read_only_fields = fields


class JobEventSerializer(serializers.ModelSerializer[JobEvent]):
    attempt = serializers.SerializerMethodField()

    class Meta:
        model = JobEvent
        fields = ["time", "attempt", "from_state", "to_state", "reason"]
        read_only_fields = fields

    def get_attempt(self, event: JobEvent) -> int | None:
        return event.attempt.number if event.attempt else None


# --- reads ------------------------------------------------------------------------------


def _latest_attempt(field: str) -> Subquery:
    return Subquery(
        Attempt.objects.filter(job=OuterRef("pk")).order_by("-number").values(field)[:1]
    )


def jobs_listed(*, user: User) -> QuerySet[Job]:
    """The jobs the caller may see (jobs.access), with what a row shows."""
    return (
        jobs_visible_to(user=user)
        .select_related("project", "cluster", "user", "code")
        .annotate(
            latest_attempt=_latest_attempt("number"),
            output_complete=Coalesce(_latest_attempt("files_complete"), Value(False)),
        )
    )


def job_or_404(request: Request, job_id: int) -> Job:
    # Missing and not-yours answer alike, so job ids leak nothing.
    job = job_for_viewer(user=request.user, job_id=job_id)
    if job is None:
        raise NotFound()
    latest = (
        Attempt.objects.filter(job=job)
        .order_by("-number")
        .values_list("number", "files_complete")
        .first()
    )
    job.latest_attempt, job.output_complete = latest or (None, False)  # type: ignore[attr-defined]
    return job


def submission_target(*, user: User, values: dict[str, Any]) -> tuple[Project, Cluster]:
    """The project (one of the caller's, where they may submit) and the cluster a request
    names, taken out of `values`; a 400 (or 403) naming the field otherwise."""
    project = projects_of_member(user=user).filter(slug=values.pop("project")).first()
    if project is None:
        raise ValidationError({"project": ["No such project among yours; give its slug."]})
    require_submitter(user=user, project=project)
    cluster = Cluster.objects.filter(name=values.pop("cluster")).first()
    if cluster is None:
        raise ValidationError({"cluster": ["No such cluster; GET /api/v1/clusters/ lists them."]})
    return project, cluster


def _submit(*, user: User, project: Project, cluster: Cluster, spec: JobSpec) -> Job:
    # A refusal (JobError) answers through the API's one exception handler.
    job = job_submit(user=user, project=project, cluster=cluster, spec=spec)
    job.latest_attempt, job.output_complete = 1, False  # type: ignore[attr-defined]
    return job


class JobCursorPagination(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50
    page_size_query_param = "page_size"
    max_page_size = 200

    def get_page_size(self, request: Request) -> int:
        # Out of range is a 400 naming the range, like every other integer parameter.
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None:
            return self.page_size
        field = serializers.IntegerField(min_value=1, max_value=self.max_page_size)
        try:
            size: int = field.run_validation(raw)
        except ValidationError as exc:
            raise ValidationError({self.page_size_query_param: exc.detail}) from exc
        return size

    def get_schema_operation_parameters(self, view: Any) -> list[dict[str, Any]]:
        parameters = super().get_schema_operation_parameters(view)
        for parameter in parameters:
            if parameter["name"] == self.page_size_query_param:
                parameter["schema"].update(minimum=1, maximum=self.max_page_size)
        return parameters


# --- views ------------------------------------------------------------------------------


class JobListCreateView(generics.GenericAPIView[Job]):
    pagination_class = JobCursorPagination

    def get_queryset(self) -> QuerySet[Job]:
        return jobs_listed(user=request_user(self.request))

    def get_serializer_class(self) -> type[serializers.BaseSerializer[Any]]:
        # The browsable API's form posts a submission.
        return JobCreateSerializer if self.request.method == "POST" else JobSerializer

    @extend_schema(
        operation_id="jobs_list",
        parameters=[JobFilterSerializer],
        responses=JobSerializer(many=True),
    )
    def get(self, request: Request) -> Response:
        """Jobs of your projects, newest first, a cursor page at a time."""
        query = JobFilterSerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        filters = query.validated_data
        jobs = self.get_queryset()
        if "project" in filters:
            jobs = jobs.filter(project__slug=filters["project"])
        if "cluster" in filters:
            jobs = jobs.filter(cluster__name=filters["cluster"])
        if "state" in filters:
            jobs = jobs.filter(state=filters["state"])
        if filters["mine"]:
            jobs = jobs.filter(user_id=request.user.pk or 0)
        page = self.paginate_queryset(jobs) or []
        waiting = jobs_waiting(page)
        return self.get_paginated_response(
            JobSerializer(page, many=True, context={"waiting": waiting}).data
        )

    @extend_schema(
        operation_id="jobs_create",
        request=JobCreateSerializer,
        responses={201: JobSerializer},
    )
    def post(self, request: Request) -> Response:
        """Submit a job: the same checks, quota and queueing as the submit form."""
        data = JobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        user = request_user(request)
        project, cluster = submission_target(user=user, values=values)
        if values["code"] is not None:
            values["code"] = code_in_project(user=user, project=project, sha256=values["code"])
        job = _submit(user=user, project=project, cluster=cluster, spec=JobSpec(**values))
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


class JobDetailView(APIView):
    @extend_schema(operation_id="jobs_retrieve", responses=JobSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        """One job of your projects."""
        return Response(JobSerializer(job_or_404(request, job_id)).data)


class JobCancelView(APIView):
    @extend_schema(operation_id="jobs_cancel", request=None, responses={202: JobSerializer})
    def post(self, request: Request, job_id: int) -> Response:
        """Cancel the job's live attempt (its submitter or a project owner)."""
        job_cancel(job=job_or_404(request, job_id), user=request_user(request))
        return Response(
            JobSerializer(job_or_404(request, job_id)).data, status=status.HTTP_202_ACCEPTED
        )


class JobCloneView(APIView):
    @extend_schema(
        operation_id="jobs_clone", request=JobCloneSerializer, responses={201: JobSerializer}
    )
    def post(self, request: Request, job_id: int) -> Response:
        """Submit a copy of the job, with any of its spec fields changed."""
        job = job_or_404(request, job_id)
        user = request_user(request)
        require_submitter(user=user, project=job.project)
        changes = JobCloneSerializer(data=request.data)
        changes.is_valid(raise_exception=True)
        values = dict(changes.validated_data)
        if values.get("code") is not None:
            values["code"] = code_in_project(user=user, project=job.project, sha256=values["code"])
        # Without changes the copy runs the original's snapshot: the same bytes, stored once.
        spec = dataclasses.replace(spec_from_job(job), **values)
        clone = _submit(user=user, project=job.project, cluster=job.cluster, spec=spec)
        return Response(JobSerializer(clone).data, status=status.HTTP_201_CREATED)


class AttemptListView(APIView):
    @extend_schema(operation_id="jobs_attempts", responses=AttemptSerializer(many=True))
    def get(self, request: Request, job_id: int) -> Response:
        """The job's attempts (one per submission to Slurm), first to last."""
        job = job_or_404(request, job_id)
        attempts = Attempt.objects.filter(job=job).order_by("number")
        return Response(AttemptSerializer(attempts, many=True).data)


class JobEventListView(APIView):
    @extend_schema(operation_id="jobs_events", responses=JobEventSerializer(many=True))
    def get(self, request: Request, job_id: int) -> Response:
        """The job's state changes with their reasons, oldest first."""
        job = job_or_404(request, job_id)
        events = JobEvent.objects.filter(job=job).select_related("attempt").order_by("time", "id")
        return Response(JobEventSerializer(events, many=True).data)
