"""How the runs table shows a value (numbers to four significant digits, durations as h:mm),
and whether a page may offer to change a run's note, tags and group."""

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

from jobs.access import can_annotate
from jobs.models import Job

register = template.Library()


@register.filter
def run_cell(value: Any, column: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if column == "duration":
        minutes = round(float(value) / 60)
        return f"{minutes // 60}:{minutes % 60:02d}"
    if isinstance(value, datetime):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
    if column == "mfu" and isinstance(value, float) and value <= 1:
        return f"{value * 100:.1f}%"  # the portal's MFU is a fraction; a printed one may be %
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@register.simple_tag(takes_context=True)
def may_annotate(context: template.Context, job: Job) -> bool:
    """Whether the page's reader may change the run's note, tags and group (jobs.access)."""
    request = context.get("request")
    return request is not None and can_annotate(user=request.user, job=job)
