"""Expected starts of a job and its alternatives (jobs.queue.forecast), for the submit form
and the REST API.

The form asks once its preview has settled and is valid (static/js/starts.js), never per
keystroke; the answers are cached per cluster and options, so a repeated ask costs no
Slurm command. The API takes the same body as a submission and submits nothing.
"""

from typing import Any

from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_POST
from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from clusters.models import Cluster
from jobs.queue.forecast import expected_starts, start_options
from jobs.specs import JobSpec, validate_spec
from projects.models import Project, Quota
from web.auth import request_user
from web.jobs.api import submission_target
from web.jobs.forms import JobForm, project_clusters
from web.jobs.inputs import JobCreateSerializer
from web.jobs.views import partitions_for

FIX = "Fix the fields marked in red to see when it would start."


def _starts(
    *, user: User, project: Project, cluster: Cluster, spec: JobSpec
) -> dict[str, list[str]] | list[dict[str, Any]]:
    """The spec's problems by field, or each option's expected start as JSON."""
    partitions = partitions_for(user, cluster)
    quota = Quota.objects.filter(project=project).first()
    problems = validate_spec(spec=spec, partitions=partitions, quota=quota)
    if problems:
        return problems
    others = project_clusters(user=user, project=project).exclude(pk=cluster.pk)
    options = start_options(
        spec=spec,
        cluster=cluster,
        partitions=partitions,
        others={other: partitions_for(user, other) for other in others},
    )
    now = timezone.now()
    forecasts = expected_starts(user=user, project=project, options=options, now=now)
    return [forecast.as_json(now) for forecast in forecasts]


@login_required
@require_POST
def job_starts(request: HttpRequest) -> JsonResponse:
    """When the posted job, and each alternative, would start: {"options": [...]}."""
    user = request_user(request)
    form = JobForm(request.POST, user=user)
    if not form.is_valid():
        return JsonResponse({"options": [], "message": FIX})
    project, cluster = form.cleaned_data["project"], form.cleaned_data["cluster"]
    answer = _starts(user=user, project=project, cluster=cluster, spec=form.spec())
    if isinstance(answer, dict):
        return JsonResponse({"options": [], "message": FIX})  # the preview names each problem
    return JsonResponse({"options": answer})


class JobStartsView(APIView):
    @extend_schema(
        operation_id="jobs_starts",
        request=JobCreateSerializer,
        responses={200: dict},
    )
    def post(self, request: Request) -> Response:
        """When this job, and a few alternatives, would start: asked of Slurm's scheduler
        (`sbatch --test-only`) as your account, corrected by the history of its estimates.
        The body is a submission's; nothing is submitted."""
        data = JobCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        user = request_user(request)
        project, cluster = submission_target(user=user, values=values)
        if not project_clusters(user=user, project=project).filter(pk=cluster.pk).exists():
            raise ValidationError(
                {"cluster": [f"Project {project.slug} cannot run on {cluster.name} as you."]}
            )
        values["code"] = None  # where the job would start does not depend on its code
        answer = _starts(user=user, project=project, cluster=cluster, spec=JobSpec(**values))
        if isinstance(answer, dict):
            raise ValidationError(answer)
        return Response({"options": answer})
