"""Checkpoints an attempt's trainer wrote, as the agent last listed them."""

from django.db import models

from jobs.models import Attempt


class Checkpoint(models.Model):
    """One entry of an attempt's checkpoint directory (a file, or a directory of shards)."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="checkpoints")
    name = models.CharField(max_length=255)
    step = models.BigIntegerField(null=True, blank=True)
    size = models.BigIntegerField(default=0)
    modified_at = models.DateTimeField()
    is_dir = models.BooleanField(default=False)
    # Temp files of a save in progress, empty files: listed, never resumed from.
    complete = models.BooleanField(default=True)

    class Meta:
        ordering = ["attempt", "step", "name"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="checkpoint_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.attempt}: {self.name}"
