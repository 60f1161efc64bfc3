"""`{% job_failures job %}`: the job page's diagnosis, checkpoints and stragglers cards."""

from typing import Any

from django import template
from django.urls import reverse

from jobs.models import Job
from monitoring.selectors import job_failures

register = template.Library()


@register.inclusion_tag("monitoring/_failures.html", takes_context=True)
def job_failures_cards(context: dict[str, Any], job: Job) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    data = job_failures(job=job)
    is_staff = bool(getattr(user, "is_staff", False))
    for straggler in data["stragglers"]:
        straggler_url = reverse(
            "node-drain", kwargs={"cluster": job.cluster.name, "node": straggler.node}
        )
        data.setdefault("drain_urls", {})[straggler.node] = straggler_url
    return {
        **data,
        "job": job,
        "can_drain": is_staff,
        "request": request,
        "csrf_token": context.get("csrf_token"),
    }
