"""How much code one person may upload: CODE_UPLOAD_RATE_LIMIT archives and
CODE_UPLOAD_RATE_BYTES bytes in a sliding CODE_UPLOAD_RATE_WINDOW (a bytes cap of 0 counts
archives only; an archive limit of 0 switches the rate off).

Counted on upload records written as each upload is admitted, whether it is then kept,
found there already or refused, so that the same bytes sent again and again count too.
The check holds the user's row lock until the record is written, as the submit rate
does (`jobs.submit_rate`), so parallel uploads are counted one after the other.
"""

import math
from datetime import datetime, timedelta
from typing import NoReturn

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from jobs.access import require_submitter
from jobs.errors import JobError
from jobs.models import CodeUpload
from jobs.submit_rate import window_words
from portal_lib.errors import RateLimited
from projects.models import Project
from projects.storage import fmt_bytes


class CodeUploadRateExceeded(JobError, RateLimited):
    """Over the upload rate: a 429 with Retry-After in the API, a form error on the page."""

    code = "code_upload_rate"


def code_upload_admit(*, user: User, project: Project, size: int) -> None:
    """Count an upload of `size` bytes, or refuse it saying the limit and when to retry."""
    require_submitter(user=user, project=project)  # a viewer is refused, not counted
    limit = int(settings.CODE_UPLOAD_RATE_LIMIT)
    if limit <= 0:
        return
    window = timedelta(seconds=float(settings.CODE_UPLOAD_RATE_WINDOW))
    with transaction.atomic():
        User.objects.select_for_update().filter(pk=user.pk).first()
        now = timezone.now()
        # Newest first, at most `limit`: the window never holds more once admitted.
        recent = list(
            CodeUpload.objects.filter(user=user, at__gt=now - window)
            .order_by("-at")
            .values_list("at", "size")[:limit]
        )
        if len(recent) >= limit:
            what = "one code archive" if limit == 1 else f"at most {limit} code archives"
            _refuse(what, recent[limit - 1][0] + window - now, window)
        wait = _bytes_wait(recent, size=size, now=now, window=window)
        if wait is not None:
            cap = fmt_bytes(int(settings.CODE_UPLOAD_RATE_BYTES))
            _refuse(f"at most {cap} of code", wait, window)
        CodeUpload.objects.create(user=user, project=project, size=size, at=now)


def _bytes_wait(
    recent: list[tuple[datetime, int]], *, size: int, now: datetime, window: timedelta
) -> timedelta | None:
    """How long until `size` more bytes fit in the window; None: they fit now.

    An upload into an empty window always fits, whatever its size (the upload cap
    bounds it), so a cap below one archive still lets one through per window.
    """
    cap = int(settings.CODE_UPLOAD_RATE_BYTES)
    used = sum(sent for _, sent in recent)
    if cap <= 0 or not recent or used + size <= cap:
        return None
    for at, sent in reversed(recent[1:]):  # oldest first: the order they leave the window
        used -= sent
        if used + size <= cap:
            return at + window - now
    return recent[0][0] + window - now  # when the newest leaves, the window is empty


def _refuse(what: str, wait: timedelta, window: timedelta) -> NoReturn:
    seconds = max(math.ceil(wait.total_seconds()), 1)
    raise CodeUploadRateExceeded(
        f"You may upload {what} in {window_words(window.total_seconds())}; "
        f"try again in {seconds} s.",
        retry_after=seconds,
    )
