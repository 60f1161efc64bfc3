"""Filters of the efficiency card and the idle ladder."""

from datetime import datetime

from django import template

from monitoring.goodput.report import hours_text, share_text

register = template.Library()
DASH = "\u2013"  # an en dash for a value the card lacks


@register.filter
def seconds(value: float | None) -> str:
    """A duration for people: `45 s`, `3 min 20 s`, `2 h 5 min`, `24 h`."""
    if value is None:
        return DASH
    total = round(value)
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


@register.filter
def percent(value: float | None) -> str:
    """A share (0.25) as `25.0 %`."""
    return DASH if value is None else f"{value * 100:.1f} %"


@register.filter
def iso_time(value: str | None) -> str:
    """An ISO time as `2026-12-01 16:05:00 UTC`."""
    if not value:
        return DASH
    return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S UTC")


@register.filter
def gpu_hours(value: float | None) -> str:
    """GPU-hours as the goodput reports print them (the CSV too): `12.345`."""
    return hours_text(value)


@register.filter
def goodput_percent(value: float | None) -> str:
    """A goodput as the reports print it: `25.0 %`, a dash when nothing was charged."""
    text = share_text(value)
    return f"{text} %" if text else DASH
