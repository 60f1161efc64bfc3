"""Links the server builds to a series: its name is always one percent-encoded path segment.

A series name comes from what a job printed (a metrics.jsonl key may be any text), so
`/`, `?`, `#`, `%` and `..` in it must never change which URL a link points at.
"""

from urllib.parse import quote

from django.urls import reverse


def series_url(*, job_id: int, number: int, name: str) -> str | None:
    """The series' REST URL; None for a name of dots only, which no URL path can carry.

    Browsers read `.` and `..` segments (even as %2E) as moves up the path, so such a
    name has no link; it is still listed by name.
    """
    if not name or set(name) == {"."}:
        return None
    base = reverse("attempt-series-names", kwargs={"job_id": job_id, "number": number})
    return f"{base}/{quote(name, safe='')}"
