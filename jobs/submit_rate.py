"""How often one person may submit: at most SUBMIT_RATE_LIMIT jobs in SUBMIT_RATE_WINDOW seconds.

Counted on the jobs themselves (a sliding window over `Job.created_at`), so the web
form, the API and clones share one count, across every server process. The check
holds the user's row lock until the job is written, so parallel submissions are
counted one after the other.
"""

import math
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.utils import timezone

from jobs.errors import JobError
from jobs.models import Job
from portal_lib.errors import RateLimited


class SubmitRateExceeded(JobError, RateLimited):
    """Over the submit rate: a 429 with Retry-After in the API, a form error on the page."""

    code = "submit_rate"


def submit_rate_check(*, user: User) -> None:
    """Refuse a submission over the user's rate, saying the limit and when to retry.

    Call it inside the transaction that creates the job.
    """
    limit = int(settings.SUBMIT_RATE_LIMIT)
    window = float(settings.SUBMIT_RATE_WINDOW)
    if limit <= 0:
        return
    User.objects.select_for_update().filter(pk=user.pk).first()
    now = timezone.now()
    # The limit-th newest submission in the window: while it is in it, the window is full.
    oldest_counted = (
        Job.objects.filter(user=user, created_at__gt=now - timedelta(seconds=window))
        .order_by("-created_at")
        .values_list("created_at", flat=True)[limit - 1 : limit]
        .first()
    )
    if oldest_counted is None:
        return
    wait = math.ceil((oldest_counted + timedelta(seconds=window) - now).total_seconds())
    raise SubmitRateExceeded(
        f"You may submit at most {limit} jobs in {window_words(window)}; "
        f"try again in {max(wait, 1)} s.",
        retry_after=wait,
    )


def window_words(window: float) -> str:
    """A window of seconds as a rate's message says it: an hour, 10 minutes, 90 seconds."""
    if window % 3600 == 0:
        hours = int(window // 3600)
        return "an hour" if hours == 1 else f"{hours} hours"
    if window % 60 == 0:
        minutes = int(window // 60)
        return "a minute" if minutes == 1 else f"{minutes} minutes"
    return f"{window:g} seconds"
