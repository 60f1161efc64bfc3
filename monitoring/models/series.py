"""Time series behind the charts: a poll's points per attempt in blocks, compacted per series.

See `monitoring.series.read` for the layout and why; these are only the tables.
"""

from django.db import models
from django.db.models import Q

from jobs.models import Attempt

# Points per full chunk; a full chunk is never rewritten.  64 KiB of float64 pairs.
CHUNK_SIZE = 4096


class SeriesHead(models.Model):
    """An attempt's series: each one's last point, and what waits in blocks for compaction."""

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="series_head"
    )
    # Appends since the last compaction (a new head starts part-way through the cycle so
    # that attempts started together are not all compacted in the same poll).
    blocks = models.PositiveSmallIntegerField(default=0)
    # Points in the attempt's blocks: a burst is compacted at once rather than kept there.
    points = models.PositiveIntegerField(default=0)
    # Every series' last point appended (arrival order, not largest x), in
    # `monitoring.series.blocks`' layout: its names are the attempt's series.
    data = models.BinaryField(default=b"")

    def __str__(self) -> str:
        return f"series of {self.attempt_id}"


class SeriesBlock(models.Model):
    """One append's points of one attempt, every series in one row (`monitoring.series.blocks`)."""

    # Indexed by (attempt, id) below: an attempt's blocks in the order they came.
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="series_blocks", db_index=False
    )
    count = models.PositiveIntegerField()
    data = models.BinaryField()

    class Meta:
        indexes = [models.Index(fields=["attempt", "id"], name="seriesblock_attempt")]

    def __str__(self) -> str:
        return f"{self.attempt_id}: block {self.pk} ({self.count})"


class Series(models.Model):
    """One named series of an attempt, owner of its compacted chunks (made at compaction)."""

    # No index of its own: the unique (attempt, name) serves lookups by attempt.
    attempt = models.ForeignKey(
        Attempt, on_delete=models.CASCADE, related_name="series", db_index=False
    )
    name = models.CharField(max_length=200)

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
