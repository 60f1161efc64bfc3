"""`{% job_failures_cards job %}`: the job page's diagnosis, stragglers and checkpoints cards."""

from typing import Any

from django import template

from clusters.access import can_drain
from jobs.models import Job
from monitoring.selectors import job_failures

register = template.Library()


@register.inclusion_tag("monitoring/_failures.html", takes_context=True)
def job_failures_cards(context: dict[str, Any], job: Job) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    return {
        **job_failures(job=job),
        "job": job,
        # Draining is for staff; the endpoint checks again.
        "can_drain": can_drain(user=user),
        "request": request,
        "csrf_token": context.get("csrf_token"),
    }
