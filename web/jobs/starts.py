"""The submit form's expected starts: the choice and its alternatives (jobs.queue.forecast).

Asked by the form once its preview has settled and is valid (static/js/starts.js), never
per keystroke; the answers are cached per cluster and options, so a repeated ask costs no
Slurm command.
"""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.http import require_POST

from jobs.queue.forecast import expected_starts, start_options
from jobs.specs import validate_spec
from projects.access import clusters_for_project
from projects.models import Quota
from web.auth import request_user
from web.jobs.forms import JobForm, usable_clusters
from web.jobs.views import partitions_for


@login_required
@require_POST
def job_starts(request: HttpRequest) -> JsonResponse:
    """When the posted job, and each alternative, would start: {"options": [...]}."""
    user = request_user(request)
    form = JobForm(request.POST, user=user)
    fix = {"options": [], "message": "Fix the fields marked in red to see when it would start."}
    if not form.is_valid():
        return JsonResponse(fix)
    project, cluster = form.cleaned_data["project"], form.cleaned_data["cluster"]
    partitions = partitions_for(user, cluster)
    quota = Quota.objects.filter(project=project).first()
    if validate_spec(spec=form.spec(), partitions=partitions, quota=quota):
        return JsonResponse(fix)  # the preview names each problem
    others = (
        usable_clusters(user=user)
        .filter(pk__in=clusters_for_project(project=project).values("pk"))
        .exclude(pk=cluster.pk)
    )
    options = start_options(
        spec=form.spec(),
        cluster=cluster,
        partitions=partitions,
        others={other: partitions_for(user, other) for other in others},
    )
    now = timezone.now()
    forecasts = expected_starts(user=user, project=project, options=options, now=now)
    return JsonResponse({"options": [forecast.as_json(now) for forecast in forecasts]})
