from django.db import models

from jobs.models import Attempt
from portal_lib.json_codec import JSONField


class RecordSearch(models.Model):
    """Where an attempt's trainers write their own records, and when they were last looked for."""

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="record_search"
    )
    # The command's working directory, as the batch script wrote it (jobs.rundir.WORKDIR_FILE).
    workdir = models.CharField(max_length=4096, blank=True)
    searched_at = models.FloatField(null=True, blank=True, help_text="Unix time of the last find.")
    # The find after the attempt ended has run: files written as the job ended are known.
    final = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"record search of {self.attempt_id}"


class RecordFile(models.Model):
    """A trainer's record file (monitoring.records) followed by byte offset; no bytes are kept."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="record_files")
    path = models.CharField(max_length=4096)
    kind = models.CharField(max_length=20)  # monitoring.records.names: tfevents, csv, ...
    offset = models.BigIntegerField(default=0, help_text="Read in whole up to here.")
    size = models.BigIntegerField(default=0, help_text="The file's size when last seen.")
    mtime = models.FloatField(default=0.0)
    read_mtime = models.FloatField(default=0.0, help_text="A whole-file record read at this mtime.")
    inode = models.BigIntegerField(null=True, blank=True)
    header = JSONField(default=list, blank=True)  # metrics.csv's columns
    last_step = models.BigIntegerField(null=True, blank=True)
    skipped = models.BigIntegerField(default=0, help_text="Records or rows that could not be read.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["attempt", "path"], name="recordfile_unique_path")
        ]

    def __str__(self) -> str:
        return f"{self.attempt_id}: {self.path}"
