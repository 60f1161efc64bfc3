"""Whether a page's reader may act on a job, so a page offers only what the reader may do
(jobs.access decides; the views refuse the rest all the same)."""

from django import template

from jobs.access import can_cancel
from jobs.models import Job

register = template.Library()


@register.simple_tag(takes_context=True)
def may_cancel(context: template.Context, job: Job) -> bool:
    request = context.get("request")
    return request is not None and can_cancel(user=request.user, job=job)
