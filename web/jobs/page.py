from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from clusters.access import can_drain
from jobs.access import job_for_viewer
from jobs.lineage import can_resume, forks_for_viewer
from jobs.models import Attempt, Job, JobEvent
from jobs.poll.backoff import account_delay
from monitoring.goodput.selectors import idle_ladder, job_efficiency
from monitoring.ingest.parse import MAX_SERIES_PER_ATTEMPT
from monitoring.ingest.worker import MAX_NAMES_PER_LINE
from monitoring.job_page.facts import FAILED_STATES, banner_lines, job_page_config
from monitoring.job_page.header import header_facts
from monitoring.job_page.selectors import job_failures
from monitoring.models import AttemptIngest
from sessions.card import session_card


@login_required
def job_page(request: HttpRequest, job_id: int) -> HttpResponse:
    """The live job page: it follows the job across attempts; data comes over REST and WebSocket."""
    job = job_for_viewer(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job, or not one of your projects'.")
    events = list(JobEvent.objects.filter(job=job).select_related("attempt").order_by("time", "id"))
    attempts = list(Attempt.objects.filter(job=job).order_by("number"))
    number = attempts[-1].number if attempts else 1
    ingest = AttemptIngest.objects.filter(attempt__job=job, attempt__number=number).first()
    failures = job_failures(job=job)
    # Failure first: the latest attempt ended failed, so its diagnosis opens the page.
    latest_failed = bool(attempts) and attempts[-1].state in FAILED_STATES
    banner = next(
        (d for d in failures["diagnoses"] if latest_failed and d["attempt"] == number), None
    )
    if banner is not None:
        banner = {
            **banner,
            "tail": banner_lines(attempt_id=attempts[-1].pk, diagnosis=banner["diagnosis"]),
        }
    # Said while the poll still reads the attempt's files and leaves its account out.
    latest = attempts[-1] if attempts and not attempts[-1].files_complete else None
    delay = account_delay(account_id=latest.account_id) if latest else None
    # The sweep trial the job is, if any: read by relation name (sweeps sit above this layer).
    trial = (
        Job.objects.filter(pk=job.pk, sweep_trial__isnull=False)
        .values("sweep_trial__number", "sweep_trial__sweep_id", "sweep_trial__sweep__name")
        .first()
    )
    return render(
        request,
        "monitoring/job.html",
        {
            "job": job,
            "trial": trial,
            "ingest": ingest if ingest is not None and ingest.has_notice else None,
            "output_in_bursts": ingest is not None and ingest.output_in_bursts,
            "account_delay": delay,
            "series_cap": MAX_SERIES_PER_ATTEMPT,
            "names_cap": MAX_NAMES_PER_LINE,
            "events": events,
            "attempts": attempts,
            "attempt_number": number,
            "facts": header_facts(job=job, attempts=attempts, now=timezone.now()),
            "session": session_card(
                job=job, attempts=attempts, user=request.user, now=timezone.now()
            ),
            "latest_failed": latest_failed,
            # Lineage (jobs.lineage): the fork's parent and the job's own forks, those the viewer
            # may see, and whether the checkpoint list offers Resume.
            "parent": job_for_viewer(user=request.user, job_id=job.parent_id)
            if job.parent_id
            else None,
            "forks": forks_for_viewer(user=request.user, job=job),
            "can_resume": job.is_finished and can_resume(user=request.user, job=job),
            "banner": banner,
            **failures,
            "diagnoses": [
                d for d in failures["diagnoses"] if banner is None or d["attempt"] != number
            ],
            "can_drain": can_drain(user=request.user),
            "cards": job_efficiency(job=job),
            "idle": idle_ladder(job=job),
            "params": [
                {"key": k, "value": v, "source": (job.param_sources or {}).get(k, "")}
                for k, v in sorted((job.params or {}).items())
            ],
            "config": job_page_config(job=job, attempts=attempts),
            "download_url": reverse(
                "attempt-log-download", kwargs={"job_id": job.pk, "number": number}
            ),
        },
    )
