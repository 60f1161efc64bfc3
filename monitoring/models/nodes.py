"""The node health ledger (monitoring.nodes): every signal that blamed a node, with the job
as evidence, and each node's standing."""

from django.db import models

from clusters.models import Cluster
from jobs.models import Attempt


class NodeSignal(models.TextChoices):
    GPU_HARDWARE = "gpu_hardware", "GPU hardware fault"
    GPU_ECC = "gpu_ecc", "Uncorrected ECC errors"
    NODE_FAILURE = "node_failure", "Node failure"
    HANG = "hang", "Hang's culprit"
    NCCL_TIMEOUT = "nccl_timeout", "NCCL timeout"
    STRAGGLER = "straggler", "Straggler"
    PREFLIGHT = "preflight", "Failed its preflight"
    HEALTHY = "healthy", "Healthy job"


class Verdict(models.TextChoices):
    HEALTHY = "healthy", "Healthy"
    SUSPECT = "suspect", "Suspect"
    BAD = "bad", "Bad"


class NodeEvent(models.Model):
    """One attempt's word on one node: a signal that blames it, or a healthy job run there."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=64)
    kind = models.CharField(max_length=16, choices=NodeSignal.choices)
    weight = models.FloatField(default=0.0)  # what it added to the score when recorded
    at = models.DateTimeField()
    attempt = models.ForeignKey(Attempt, null=True, on_delete=models.SET_NULL, related_name="+")
    detail = models.TextField(blank=True)  # the diagnosis's title and evidence line
    # The node's healthy jobs when this was recorded: those since fade the signal.
    healthy_before = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["attempt", "node", "kind"], name="nodeevent_once_per_attempt"
            )
        ]
        indexes = [models.Index(fields=["cluster", "node", "-at"], name="nodeevent_node_recent")]

    def __str__(self) -> str:
        return f"{self.kind} on {self.node} at {self.at:%Y-%m-%d %H:%M}"


class NodeHealth(models.Model):
    """A node's standing in the ledger: its score when last judged, and the verdict."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    node = models.CharField(max_length=64)
    healthy_jobs = models.PositiveIntegerField(default=0)
    score = models.FloatField(default=0.0)
    verdict = models.CharField(max_length=8, choices=Verdict.choices, default=Verdict.HEALTHY)
    verdict_since = models.DateTimeField(null=True, blank=True)
    last_signal_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster", "node"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node"], name="nodehealth_one_per_node")
        ]

    def __str__(self) -> str:
        return f"{self.node} of {self.cluster}: {self.verdict} ({self.score:.2f})"
