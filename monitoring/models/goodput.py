"""Where an attempt's GPU-hours went: what the poll saw while it ran, and its card once it ended.

See `monitoring.goodput.idle` (the idle-GPU ladder) and `monitoring.goodput.efficiency` (the card).
"""

from django.db import models

from jobs.models import Attempt
from portal_lib.json_codec import JSONField
from projects.models import Project


class AttemptActivity(models.Model):
    """The portal's own observations of a running attempt: its first step and its idle GPUs.

    Sample times (`*_x`) are the GPU sampler's clock, as stored in the GPU series;
    the ladder's times (`warned_at`, `cancel_at`) are the portal's.
    """

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="activity"
    )
    first_step_at = models.DateTimeField(null=True, blank=True)
    # Per GPU utilisation series, the x of the last sample the idle rule examined.
    gpu_checked = JSONField(default=dict, blank=True)
    # Since when every GPU of the attempt has been under the threshold (None: busy).
    idle_since_x = models.FloatField(null=True, blank=True)
    idle_last_x = models.FloatField(null=True, blank=True)
    threshold_percent = models.PositiveSmallIntegerField(null=True, blank=True)
    warned_at = models.DateTimeField(null=True, blank=True)
    cancel_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "attempt activities"

    def __str__(self) -> str:
        return f"activity of attempt {self.attempt_id}"


class EfficiencyCard(models.Model):
    """An ended attempt's efficiency card (`monitoring.goodput.efficiency.Card.as_json`).

    Its GPU-hours by part are also columns, so that project reports sum them in SQL
    (`monitoring.goodput.report`); `ended_at` (the charge's end) puts it in a week.
    """

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="efficiency"
    )
    data = JSONField()
    # Whether its GPU-hours are the ledger's charge (else the portal's times, until it exists).
    from_ledger = models.BooleanField(default=False)
    computed_at = models.DateTimeField(auto_now=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    gpu_hours = models.FloatField(default=0.0)
    queued_gpu_hours = models.FloatField(default=0.0)
    startup_gpu_hours = models.FloatField(default=0.0)
    productive_gpu_hours = models.FloatField(default=0.0)
    declared_pauses_gpu_hours = models.FloatField(default=0.0)
    hung_gpu_hours = models.FloatField(default=0.0)
    idle_gpu_hours = models.FloatField(default=0.0)
    lost_gpu_hours = models.FloatField(default=0.0)

    class Meta:
        indexes = [models.Index(fields=["ended_at"], name="efficiencycard_ended_at")]

    def __str__(self) -> str:
        return f"efficiency card of attempt {self.attempt_id}"


class GoodputDigest(models.Model):
    """A project's weekly goodput mail, sent once: the row is claimed before the mail goes."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="goodput_digests")
    week = models.DateField(help_text="The Monday of the ISO week it reports.")
    recipients = models.PositiveSmallIntegerField(default=0)
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "week"], name="goodputdigest_once")
        ]

    def __str__(self) -> str:
        return f"goodput digest of {self.project} for the week of {self.week}"
