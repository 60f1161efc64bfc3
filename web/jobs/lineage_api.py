"""Resume a job from a chosen checkpoint, or fork a new job from it, over REST.

The checks are the services' (jobs.resume, jobs.lineage through job_submit); this module
reads the request and names the checkpoint (monitoring.checkpoints.chosen).
"""

import dataclasses
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.access import require_submitter
from jobs.lineage import fork_name
from jobs.services import job_submit
from jobs.specs import spec_from_job
from monitoring.checkpoints.chosen import checkpoint_chosen, checkpoint_resume, fork_point
from portal_lib.bounds import BIGINT_MAX, INT_MAX
from projects.access import projects_of_member
from web.auth import request_user
from web.jobs.api import JobSerializer, job_or_404
from web.jobs.code_api import code_in_project
from web.jobs.inputs import JobCloneSerializer


class CheckpointChoiceSerializer(serializers.Serializer[Any]):
    """Which checkpoint: its step, or its attempt and name (as the job's failures list them)."""

    step = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=BIGINT_MAX,
        help_text="Its step.",
    )
    attempt = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        max_value=INT_MAX,
        help_text="The attempt that saved it; none: the newest attempt with that step.",
    )
    checkpoint = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=255, help_text="Its name."
    )


class JobForkSerializer(JobCloneSerializer, CheckpointChoiceSerializer):
    """The checkpoint, and any spec field to change in the fork; the rest is the parent's."""

    project = serializers.SlugField(
        required=False, help_text="The fork's project (yours); none: the parent's."
    )


def _choice(values: dict[str, Any]) -> dict[str, Any]:
    return {
        "step": values.pop("step", None),
        "attempt": values.pop("attempt", None),
        "name": values.pop("checkpoint", ""),
    }


class JobResumeView(APIView):
    @extend_schema(
        operation_id="jobs_resume",
        request=CheckpointChoiceSerializer,
        responses={202: JobSerializer},
    )
    def post(self, request: Request, job_id: int) -> Response:
        """Resume the ended job from one of its checkpoints: its next attempt starts there."""
        job = job_or_404(request, job_id)
        choice = CheckpointChoiceSerializer(data=request.data)
        choice.is_valid(raise_exception=True)
        checkpoint_resume(job=job, user=request_user(request), **_choice(choice.validated_data))
        return Response(
            JobSerializer(job_or_404(request, job_id)).data, status=status.HTTP_202_ACCEPTED
        )


class JobForkView(APIView):
    @extend_schema(
        operation_id="jobs_fork", request=JobForkSerializer, responses={201: JobSerializer}
    )
    def post(self, request: Request, job_id: int) -> Response:
        """Start a new job from one of the job's checkpoints, with any spec field changed."""
        parent = job_or_404(request, job_id)
        user = request_user(request)
        data = JobForkSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        project = parent.project
        if "project" in values:
            slug = values.pop("project")
            named = projects_of_member(user=user).filter(slug=slug).first()
            if named is None:
                raise serializers.ValidationError(
                    {"project": ["No such project among yours; give its slug."]}
                )
            project = named
        require_submitter(user=user, project=project)  # before naming what the parent saved
        chosen = checkpoint_chosen(job=parent, **_choice(values))
        spec = dataclasses.replace(spec_from_job(parent), name=fork_name(parent))
        if values.get("code") is not None:
            values["code"] = code_in_project(user=user, project=project, sha256=values["code"])
        elif spec.code is not None and project.pk != parent.project_id:
            # Another project runs the same code only from its own snapshot of it.
            values["code"] = code_in_project(user=user, project=project, sha256=spec.code.sha256)
        fork = job_submit(
            user=user,
            project=project,
            cluster=parent.cluster,
            spec=dataclasses.replace(spec, **values),
            fork=fork_point(chosen),
        )
        fork.latest_attempt, fork.output_complete = 1, False  # type: ignore[attr-defined]
        return Response(JobSerializer(fork).data, status=status.HTTP_201_CREATED)
