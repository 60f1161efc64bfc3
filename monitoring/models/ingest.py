from django.db import models

from jobs.models import Attempt
from portal_lib.json_codec import JSONField


class AttemptIngest(models.Model):
    """What the poll could not or would not turn into metrics for one attempt, and why.

    Its log bytes are always stored; these counters say what was skipped for the
    charts (and are shown on the job page), so that a job's own output never
    costs anyone else a poll.
    """

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="ingest"
    )
    # Training-metric series names accepted so far (at most the series cap).
    series_names = JSONField(default=list, blank=True)
    skipped_bytes = models.BigIntegerField(default=0, help_text="Stored, not read for metrics.")
    skipped_lines = models.BigIntegerField(default=0)
    over_budget = models.IntegerField(default=0, help_text="Polls that ran out of parse time.")
    parse_failures = models.IntegerField(default=0)
    metrics_stopped = models.BooleanField(
        default=False, help_text="Metrics are no longer read from this attempt's files."
    )
    dropped_names = models.BigIntegerField(default=0, help_text="Values over a names cap.")
    dropped_series = models.IntegerField(default=0, help_text="New names over the series cap.")
    dropped_gpu_files = models.IntegerField(default=0)
    dropped_gpu_samples = models.BigIntegerField(default=0)
    # Series a trainer's own record file gives (name: monitoring.records.names kind), and the
    # last step it gave of each: stdout's copies at or below that step are not stored, those
    # past it are until the record reaches them, and the page names the source.
    series_sources = JSONField(default=dict, blank=True)
    output_in_bursts = models.BooleanField(
        default=False, help_text="Stdout arrived in blocks while the job ran (block-buffered)."
    )
    record_steps = JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"ingest of {self.attempt_id}"

    @property
    def has_notice(self) -> bool:
        return bool(
            self.skipped_bytes
            or self.skipped_lines
            or self.metrics_stopped
            or self.dropped_names
            or self.dropped_series
            or self.dropped_gpu_files
            or self.dropped_gpu_samples
        )
