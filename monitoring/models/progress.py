from django.db import models

from jobs.models import Attempt
from portal_lib.json_codec import JSONField


class AttemptProgress(models.Model):
    """Each rank's latest step as the poll last saw it, and whether the attempt is hung.

    `ranks` maps a rank (as a string) to {node, step, step_at, alive_at, pause,
    pause_since, resumed_at, source}; times are Unix seconds. `pace` keeps the recent
    (time, step) of the furthest rank, newest last, for the attempt's own step interval.
    """

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="progress"
    )
    ranks = JSONField(default=dict, blank=True)
    pace = JSONField(default=list, blank=True)
    # "" while healthy, else "hang" or "startup" (monitoring.hangs.rules).
    verdict = models.CharField(max_length=16, blank=True)
    flagged_at = models.DateTimeField(null=True, blank=True)
    quiet_seconds = models.FloatField(null=True, blank=True)
    threshold_seconds = models.FloatField(null=True, blank=True)
    culprit_rank = models.IntegerField(null=True, blank=True)
    culprit_node = models.CharField(max_length=64, blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    why = models.TextField(blank=True)
    stacks_requested_at = models.DateTimeField(null=True, blank=True)
    # rank (as a string) -> the dump faulthandler wrote, capped.
    stacks = JSONField(default=dict, blank=True)
    # Set when the portal cancelled the attempt for its hang (the restart's diagnosis).
    hang_cancelled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"progress of {self.attempt_id}"
