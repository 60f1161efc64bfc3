from django.db import models

from jobs.models import Attempt
from portal_lib.json_codec import JSONField


class LogFile(models.Model):
    """One file of an attempt's run directory that the portal follows by byte offset.

    Bytes [first_offset, size) are stored locally; older bytes were trimmed
    to bound storage and are read from the cluster when someone asks.
    """

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="log_files")
    name = models.CharField(max_length=255)
    size = models.BigIntegerField(default=0, help_text="Bytes received: the next offset to read.")
    first_offset = models.BigIntegerField(default=0)
    remote_size = models.BigIntegerField(default=0)
    inode = models.BigIntegerField(null=True, blank=True)
    # Parser state between poll cycles: the unfinished last line, and the highest step seen
    # (a point at or below it may replace a stored one: monitoring.series.overwrite).
    carry = models.BinaryField(default=b"", blank=True)
    last_step = models.BigIntegerField(null=True, blank=True)
    # Bytes [0, parsed_to) went through the metric parser (or were skipped on purpose);
    # `carry` is only valid when it equals the bytes stored before a delivery.
    parsed_to = models.BigIntegerField(default=0)
    # Metric names this file has given (metrics.jsonl: those stdout must not repeat).
    metric_names = JSONField(default=list, blank=True)
    # The stdout reader's state between polls (monitoring.reading.reader.ReaderState.to_json):
    # latest step, epoch and its base, total steps, the provisional segment read. On a GPU
    # file: its GPUs' fault tally (monitoring.reading.gpu.faults_tally).
    reader_state = JSONField(default=dict, blank=True)
    # How stdout grew poll by poll while the job ran (monitoring.logs.bursts.Tally.to_json).
    growth = JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="logfile_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.attempt}: {self.name}"


class LogChunk(models.Model):
    """Contiguous bytes of a log file starting at `offset`; chunks never overlap."""

    log_file = models.ForeignKey(LogFile, on_delete=models.CASCADE, related_name="chunks")
    offset = models.BigIntegerField()
    data = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["log_file", "offset"], name="logchunk_unique_offset")
        ]

    def __str__(self) -> str:
        return f"{self.log_file} @{self.offset}"

    @property
    def end(self) -> int:
        return self.offset + len(self.data)
