"""Alert rules a user (or a project's owner) sets on jobs, and the alerts they fired."""

from django.conf import settings
from django.db import models

from jobs.models import Attempt, Job
from portal_lib.json_codec import JSONField
from projects.models import Project


class AlertKind(models.TextChoices):
    LOSS_NONFINITE = "loss_nonfinite", "Loss is NaN or infinite"
    LOSS_ABOVE = "loss_above", "Loss above a bound after a step"
    THROUGHPUT_DROP = "throughput_drop", "Throughput drops by a factor"
    NO_PROGRESS = "no_progress", "No progress (hang)"
    STARTED = "started", "Job started"
    ENDED = "ended", "Job ended"
    TIME_LIMIT = "time_limit", "Time limit close"


# Kinds that fire once per attempt (a state reached), not once per hour of a condition.
ONCE_PER_ATTEMPT = (AlertKind.STARTED, AlertKind.ENDED)


class AlertRule(models.Model):
    """Applies to the owner's jobs, or with a project to all of that project's jobs."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alert_rules"
    )
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="alert_rules"
    )
    kind = models.CharField(max_length=32, choices=AlertKind.choices)
    series = models.CharField(max_length=100, default="loss")
    threshold = models.FloatField(null=True, blank=True)  # a bound, or minutes left
    step = models.FloatField(null=True, blank=True)  # a bound applies after this x
    factor = models.FloatField(null=True, blank=True)  # throughput below median / factor
    to_portal = models.BooleanField(default=True)
    to_mail = models.BooleanField(default=False)
    webhook_url = models.URLField(max_length=500, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["owner", "enabled"], name="alertrule_owner")]

    def __str__(self) -> str:
        return f"{self.owner_id}:{self.kind}"


class Alert(models.Model):
    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    kind = models.CharField(max_length=32, choices=AlertKind.choices)  # the rule's, for the key
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="alerts")
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="alerts")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="alerts"
    )
    fired_at = models.DateTimeField()
    # Hours since the epoch at fire time (minus the attempt's id for a state reached):
    # the key that keeps one per rule and job per hour, and one per attempt for a state.
    window = models.BigIntegerField()
    message = models.CharField(max_length=500)
    at_x = models.FloatField(null=True, blank=True)  # the series' x when it fired
    read_at = models.DateTimeField(null=True, blank=True)
    mailed_at = models.DateTimeField(null=True, blank=True)
    webhook_at = models.DateTimeField(null=True, blank=True)
    webhook_error = models.CharField(max_length=300, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "job", "window"], name="alert_once_per_rule_job_hour"
            ),
        ]
        indexes = [models.Index(fields=["user", "-fired_at"], name="alert_user_fired")]

    def __str__(self) -> str:
        return f"{self.rule_id}@{self.job_id}: {self.message}"


class AlertState(models.Model):
    """What the evaluation keeps between polls: each watched series' recent values."""

    attempt = models.OneToOneField(
        Attempt, on_delete=models.CASCADE, primary_key=True, related_name="alert_state"
    )
    recent = JSONField(default=dict, blank=True)  # series name -> last values

    def __str__(self) -> str:
        return f"alert state of {self.attempt_id}"
