"""How the runs table shows a value: numbers to four significant digits, durations as h:mm."""

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone

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
