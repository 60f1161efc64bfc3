"""What JupyterLab's own page tells its user about the session (issue 39: warned in the
notebook's page, not only on the job page and by mail).

The proxy adds a small script of the portal's to JupyterLab's HTML pages (`notice_script`);
the script asks `/sessions/<job>/notice.json` now and then and shows the notices in a box
of its own over JupyterLab's corner: the idle warning with the time the portal will stop
the session, and the time limit coming close. The notices are written here, in the
portal; the page only shows them.
"""

import html
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.templatetags.static import static
from django.urls import reverse

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.models import AttemptActivity
from sessions.card import session_ends_at

# Before its time limit, a session's page says how long is left from this much.
TIME_LIMIT_NOTICE = timedelta(minutes=15)
_SAVE = "JupyterLab keeps what it last saved: save your notebooks now (Ctrl+S)."


@dataclass(frozen=True)
class Notice:
    kind: str  # "idle" or "time-limit": one box each, in this order
    text: str


def _clock(at: datetime) -> str:
    return f"{at:%H:%M} UTC"


def session_notices(*, job: Job, now: datetime) -> list[Notice]:
    """The running session's notices (none for one that does not run)."""
    attempt = Attempt.objects.filter(job_id=job.pk).order_by("-number").first()
    if attempt is None or attempt.state != State.RUNNING:
        return []
    notices = []
    activity = AttemptActivity.objects.filter(attempt=attempt).first()
    if activity is not None and activity.warned_at is not None and activity.cancelled_at is None:
        idle = "Idle: no GPU of this session is busy and no kernel has run anything"
        if activity.cancel_at is not None:
            text = (
                f"{idle}. The portal stops the session at {_clock(activity.cancel_at)} unless "
                f"a cell runs or its GPUs get busy. {_SAVE}"
            )
        else:
            text = f"{idle}: its GPUs are charged while they wait. Stop it when you are done."
        notices.append(Notice("idle", text))
    ends_at = session_ends_at(job=job, attempt=attempt)
    if ends_at is not None:
        left = ends_at - now
        if left <= TIME_LIMIT_NOTICE:
            minutes = max(int(left.total_seconds() // 60), 0)
            text = (
                f"This session reaches its time limit at {_clock(ends_at)} (in {minutes} min) "
                f"and stops then. {_SAVE}"
            )
            notices.append(Notice("time-limit", text))
    return notices


def notices_json(notices: list[Notice]) -> dict[str, Any]:
    return {"notices": [asdict(n) for n in notices]}


def notice_script(job_id: int) -> bytes:
    """The tag that loads the notices' script, for the end of JupyterLab's `<head>`."""
    src = html.escape(static("js/session-notice.js"))
    url = html.escape(reverse("session-notice", args=[job_id]))
    every = int(settings.SESSION_NOTICE_SECONDS)
    return (
        f'<script src="{src}" data-notice="{url}" data-every="{every}" defer></script>'
    ).encode()


def with_notice_script(page: bytes, job_id: int) -> bytes:
    """JupyterLab's HTML page with the notices' script added before `</head>` (else at the
    end); a page with no `<html` in it is left as it is."""
    lower = page.lower()
    if b"<html" not in lower:
        return page
    at = lower.find(b"</head>")
    if at < 0:
        at = len(page)
    return page[:at] + notice_script(job_id) + page[at:]
