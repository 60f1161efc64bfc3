"""Goodput in the poll: the first step of each attempt, its idle GPUs, its card once it ended.

Registered with the poller after the log and failure watchers: by then this poll's
GPU samples and steps are stored, and an ended attempt is diagnosed and, if its
policy says so, restarted, so its card knows what the next attempt redoes.
"""

import logging

from django.db import transaction
from django.utils import timezone

from clusters.agent import AgentReply, FileRead, ListingRead
from jobs.enums import State
from jobs.models import Attempt
from monitoring.goodput.card import attempt_card_compute
from monitoring.goodput.idle import idle_watch
from monitoring.models import AttemptActivity, EfficiencyCard, LogFile

logger = logging.getLogger(__name__)


def first_steps_record(attempts: list[Attempt]) -> None:
    """When the poll first saw each running attempt's first step (its startup ends there)."""
    running = [a.pk for a in attempts if a.state == State.RUNNING]
    if not running:
        return
    seen = set(
        AttemptActivity.objects.filter(
            attempt_id__in=running, first_step_at__isnull=False
        ).values_list("attempt_id", flat=True)
    )
    stepped = set(
        LogFile.objects.filter(
            attempt_id__in=set(running) - seen, last_step__isnull=False
        ).values_list("attempt_id", flat=True)
    )
    now = timezone.now()
    for attempt_id in stepped:
        AttemptActivity.objects.update_or_create(
            attempt_id=attempt_id, defaults={"first_step_at": now}
        )


class GoodputWatcher:
    def requests(self, attempts: list[Attempt]) -> tuple[list[FileRead], list[ListingRead]]:
        return [], []

    def ingest(self, attempts: list[Attempt], reply: AgentReply) -> set[int]:
        try:
            with transaction.atomic():
                first_steps_record(attempts)
        except Exception:  # never fail the poll for goodput
            logger.exception("first steps of a poll failed")
        idle_watch(attempts)
        ended = [a for a in attempts if a.is_finished and a.diagnosed_at is not None]
        if not ended:  # most polls: nothing ended, no query
            return set()
        carded = set(
            EfficiencyCard.objects.filter(attempt__in=ended).values_list("attempt_id", flat=True)
        )
        for attempt in ended:
            if attempt.pk in carded:
                continue
            try:
                with transaction.atomic():
                    attempt_card_compute(attempt=attempt)
            except Exception:  # one attempt's card must not stop the poll
                logger.exception("efficiency card of attempt %s failed", attempt.pk)
        return set()
