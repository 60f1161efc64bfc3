"""Time series behind the charts: one row per (attempt, name), points stored in chunks.

See `monitoring.series` for the layout and why; these are only the tables.
"""

from django.db import models
from django.db.models import Q

from jobs.models import Attempt

# Points per full chunk; a full chunk is never rewritten.  64 KiB of float64 pairs.
CHUNK_SIZE = 4096


class Series(models.Model):
    """One named series of an attempt, with its latest point for the live numbers."""

    # No index of its own: the unique (attempt, name) serves lookups by attempt, and every
    # poll writes this table, so an index more is a write more.
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="series", db_index=False
    )
    name = models.CharField(max_length=200)
    # The last point appended (arrival order, not largest x): what a live number shows.
    last_x = models.FloatField()
    last_y = models.FloatField()
    # Appends since the last compaction: a small chunk each, merged when it reaches the fan-out.
    unmerged = models.PositiveSmallIntegerField(default=0)

    class Meta:
        verbose_name_plural = "series"
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="series_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}:{self.name}"


class SeriesChunk(models.Model):
    """Up to CHUNK_SIZE points sorted by x, with their bounds and a min/max summary."""

    # Indexed by (series, x_min) below, which serves lookups by series alone.
    series = models.ForeignKey(
        Series, on_delete=models.CASCADE, related_name="chunks", db_index=False
    )
    # Compaction tier of a chunk that is not full (0: as appended); ignored once full.
    level = models.PositiveSmallIntegerField(default=0)
    count = models.PositiveIntegerField()
    x_min = models.FloatField()
    x_max = models.FloatField()
    y_min = models.FloatField()
    y_max = models.FloatField()
    # float64 little-endian: all xs, then all ys.
    data = models.BinaryField()
    # Same encoding: each 64-point run's min and max points, in x order.
    summary = models.BinaryField()

    class Meta:
        indexes = [
            models.Index(fields=["series", "x_min"], name="serieschunk_series_x"),
            models.Index(
                fields=["series"],
                condition=Q(count__lt=CHUNK_SIZE),
                name="serieschunk_open",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.series_id}[{self.x_min}..{self.x_max}] ({self.count})"
