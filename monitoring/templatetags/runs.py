"""How the runs table shows a value (numbers to four significant digits, a rate with its unit,
MFU in %, durations as h:mm), and whether a page may offer to change a run's note, tags and
group."""

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

from jobs.access import can_annotate
from jobs.models import Job
from portal_lib.units import quantity

register = template.Library()


@register.filter
def run_cell(cell: dict[str, Any]) -> str:
    """A cell of the table ({key, value, unit}) as text: `128k tokens/s`, `41.2 %`, `1:05`."""
    return run_text(cell["value"], cell["key"], cell.get("unit", ""))


def run_text(value: Any, column: str, unit: str = "") -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if column == "duration":
        minutes = round(float(value) / 60)
        return f"{minutes // 60}:{minutes % 60:02d}"
    if isinstance(value, datetime):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
    if unit:
        return quantity(value, unit)
    if column == "mfu" and isinstance(value, float):
        # The portal's MFU is a fraction; a trainer's printed one is in % already.
        return f"{value * 100 if value <= 1 else value:.1f} %"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@register.simple_tag(takes_context=True)
def may_annotate(context: template.Context, job: Job) -> bool:
    """Whether the page's reader may change the run's note, tags and group (jobs.access)."""
    request = context.get("request")
    return request is not None and can_annotate(user=request.user, job=job)
