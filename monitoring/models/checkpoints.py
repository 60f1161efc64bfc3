"""Checkpoints an attempt's trainer wrote, the rules that keep them, and what was deleted."""

from django.conf import settings
from django.db import models
from django.db.models import Q

from jobs.enums import Template
from jobs.models import Attempt, Job
from projects.models import Project


class Checkpoint(models.Model):
    """One checkpoint an attempt wrote (a file, or a directory of shards), as the agent last
    listed it: in `<run dir>/checkpoints`, or found in the command's working directory."""

    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="checkpoints")
    # Unique per attempt: the entry's name in the checkpoint directory, or its path from the
    # working directory (`out/checkpoint-40`) for one found there.
    name = models.CharField(max_length=1024)
    # Where it lies on the cluster (what PORTAL_RESUME_FROM names); empty on rows listed
    # before it was stored (`monitoring.checkpoints.registry.checkpoint_path` fills it in).
    path = models.CharField(max_length=4096, blank=True)
    step = models.BigIntegerField(null=True, blank=True)
    # What `du -sb` counts for it on the cluster (a directory's whole tree).
    size = models.BigIntegerField(default=0)
    size_exact = models.BooleanField(default=True)  # False: too large to size whole
    modified_at = models.DateTimeField()
    is_dir = models.BooleanField(default=False)
    # A symbolic link the job made: listed, never followed, never deleted.
    link = models.BooleanField(default=False)
    # Temp files of a save in progress, empty files: listed, never resumed from.
    complete = models.BooleanField(default=True)

    class Meta:
        ordering = ["attempt", "step", "name"]
        constraints = [
            models.UniqueConstraint(fields=["attempt", "name"], name="checkpoint_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.attempt}: {self.name}"


class BestMode(models.TextChoices):
    MIN = "min", "lowest is best"
    MAX = "max", "highest is best"


class CheckpointRule(models.Model):
    """Which checkpoints to keep: for one job, for a project's jobs of one template, or for
    all of a project's jobs (the most specific one applies; `retention.rule_for`).

    A complete checkpoint is deleted when it is outside every keep set the rule has (the
    last `keep_last` by step, the best `keep_best` by `best_metric`) and, with
    `older_than`, older than that. On a project's rule, `quota_bytes` is the project's
    checkpoint storage quota: warned near it, and over it the rule is applied to every job.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    template = models.CharField(max_length=16, choices=Template.choices, blank=True)
    job = models.ForeignKey(Job, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    keep_last = models.PositiveIntegerField(null=True, blank=True)
    keep_best = models.PositiveIntegerField(null=True, blank=True)
    best_metric = models.CharField(max_length=200, blank=True)
    best_mode = models.CharField(max_length=3, choices=BestMode.choices, default=BestMode.MIN)
    older_than = models.DurationField(null=True, blank=True)
    quota_bytes = models.BigIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["job"], condition=Q(job__isnull=False), name="checkpoint_rule_one_per_job"
            ),
            models.UniqueConstraint(
                fields=["project", "template"],
                condition=Q(job__isnull=True),
                name="checkpoint_rule_one_per_scope",
            ),
        ]

    def __str__(self) -> str:
        scope = f"job {self.job_id}" if self.job_id else self.template or "all templates"
        return f"{self.project_id}: {scope}"


class CheckpointDeletion(models.Model):
    """One checkpoint the portal deleted (or tried to): what, why, by whom, and the outcome."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="checkpoint_deletions")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=1024)
    path = models.CharField(max_length=4096)
    step = models.BigIntegerField(null=True, blank=True)
    size = models.BigIntegerField(default=0)  # the bytes freed (0 when nothing was removed)
    metrics = models.JSONField(default=dict)  # its metrics at its step, as the index showed
    reason = models.CharField(max_length=500)  # the rule, a quota, or "deleted by <user>"
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    removed = models.BooleanField(default=False)
    error = models.CharField(max_length=500, blank=True)  # why it was not removed
    at = models.DateTimeField()

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["job", "at"], name="ckpt_deletion_job_at")]

    def __str__(self) -> str:
        return f"{self.job_id}: {self.name}"
