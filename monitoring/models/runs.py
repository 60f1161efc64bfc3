from django.db import models

from jobs.models import Job
from portal_lib.json_codec import JSONField
from projects.models import Project

# The summary columns the runs table sorts and filters by (monitoring.runs.table), each indexed
# with its project. Written when series are ingested and when an attempt ends, never
# computed while the table is read.
SUMMARY_COLUMNS = (
    "loss_last",
    "loss_best",
    "eval_best",
    "throughput",
    "mfu",
    "gpu_hours",
    "duration_seconds",
)


class RunSummary(models.Model):
    """A job's summary metrics across its attempts (monitoring.runs.summary keeps it)."""

    job = models.OneToOneField(
        Job, on_delete=models.CASCADE, primary_key=True, related_name="summary"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="run_summaries")
    loss_last = models.FloatField(null=True, blank=True)
    loss_best = models.FloatField(null=True, blank=True)
    # The evaluation series it is the best of (min for losses and errors, else max).
    eval_name = models.CharField(max_length=100, blank=True)
    eval_best = models.FloatField(null=True, blank=True)
    throughput = models.FloatField(null=True, blank=True)
    throughput_unit = models.CharField(max_length=16, blank=True)  # tokens, samples, steps
    mfu = models.FloatField(null=True, blank=True)
    gpu_hours = models.FloatField(null=True, blank=True)
    duration_seconds = models.FloatField(null=True, blank=True)
    # {series name: [last y, min y, max y, last x]}, at most MAX_SERIES_PER_ATTEMPT names.
    metrics = JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "run summaries"
        indexes = [
            models.Index(fields=["project", column], name=f"runsummary_{column[:14]}")
            for column in SUMMARY_COLUMNS
        ]

    def __str__(self) -> str:
        return f"summary of job {self.job_id}"
