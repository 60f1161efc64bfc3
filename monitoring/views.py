from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from jobs.access import job_for_viewer
from jobs.models import JobEvent
from jobs.rundir import page_formats
from monitoring.ingest_parse import MAX_SERIES_PER_ATTEMPT
from monitoring.models import AttemptIngest
from monitoring.parse_worker import MAX_NAMES_PER_LINE


@login_required
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """The live job page; its data comes over REST and the WebSocket."""
    job = job_for_viewer(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job, or not one of your projects'.")
    events = list(JobEvent.objects.filter(job=job).select_related("attempt").order_by("time", "id"))
    number = max((e.attempt.number for e in events if e.attempt), default=1)
    attempt_kwargs = {"job_id": job.pk, "number": number}
    config = {
        "job": job.pk,
        "attempt": number,
        "logUrl": reverse("attempt-log", kwargs=attempt_kwargs),
        "seriesUrl": reverse("attempt-series-names", kwargs=attempt_kwargs),
        "wsUrl": f"/ws/jobs/{job.pk}/",
        # File and series names the page matches, from the one module that defines them.
        "formats": page_formats(),
    }
    ingest = AttemptIngest.objects.filter(attempt__job=job, attempt__number=number).first()
    return render(
        request,
        "monitoring/job.html",
        {
            "job": job,
            "ingest": ingest if ingest is not None and ingest.has_notice else None,
            "series_cap": MAX_SERIES_PER_ATTEMPT,
            "names_cap": MAX_NAMES_PER_LINE,
            "events": events,
            "config": config,
            "download_url": reverse("attempt-log-download", kwargs=attempt_kwargs),
        },
    )
