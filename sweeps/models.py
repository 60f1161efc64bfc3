"""A sweep (a search over settings substituted into a command) and its trials, each a job.

The rows are the whole state: each tick rebuilds the Optuna study from them, so a
restarted portal continues where the last tick's commit left it.
"""

from datetime import timedelta

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models

from clusters.models import Cluster
from jobs.enums import Template
from jobs.models import CodeSnapshot, CodeSource, Job
from projects.models import Project

MAX_TRIALS_LIMIT = 1000


class Sweep(CodeSource):
    """A search over settings; every trial's job runs from the sweep's code (CodeSource)."""

    class Sampler(models.TextChoices):
        GRID = "grid", "Grid (every combination of the choices)"
        RANDOM = "random", "Random"
        TPE = "tpe", "TPE (model-based, Optuna's default)"

    class Pruner(models.TextChoices):
        NONE = "none", "None: every trial runs to its end (unless it diverges)"
        MEDIAN = "median", "Median: stop a trial worse than the median of finished ones"
        HALVING = "halving", "Successive halving: keep the best third at each rung"

    class Direction(models.TextChoices):
        MINIMIZE = "minimize", "Minimize"
        MAXIMIZE = "maximize", "Maximize"

    class State(models.TextChoices):
        RUNNING = "running", "Running"
        PAUSED = "paused", "Paused"  # starts no trial; running ones go on
        STOPPED = "stopped", "Stopped"  # running trials cancelled, no new ones
        DONE = "done", "Done"

    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="sweeps")
    # Every trial's job runs from this snapshot (a git URL is fetched into it once).
    code = models.ForeignKey(
        CodeSnapshot, null=True, blank=True, on_delete=models.PROTECT, related_name="sweeps"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="sweeps"
    )
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="sweeps")
    name = models.CharField(max_length=128)
    created_at = models.DateTimeField(auto_now_add=True)
    # Each trial's job: these fields, the command with the trial's settings substituted.
    template = models.CharField(max_length=16, choices=Template.choices, default=Template.COMMAND)
    command = models.TextField(help_text="With {name} where a setting of the search goes.")
    setup = models.TextField(blank=True)
    nodes = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    gpus_per_node = models.PositiveIntegerField(default=1)
    cpus_per_task = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    memory_mb = models.PositiveIntegerField(null=True, blank=True)
    time_limit = models.DurationField(default=timedelta(hours=1))
    partition = models.CharField(max_length=64, blank=True)
    # The search (sweeps.space): {"lr": {"type": "float", "low": .., "high": .., "log": true}}.
    space = models.JSONField()
    # Trials to run first, in order: settings, and optionally "nodes" for that trial alone.
    first_trials = models.JSONField(default=list, blank=True)
    sampler = models.CharField(max_length=16, choices=Sampler.choices, default=Sampler.TPE)
    pruner = models.CharField(max_length=16, choices=Pruner.choices, default=Pruner.MEDIAN)
    seed = models.PositiveIntegerField(default=0)
    metric = models.CharField(max_length=200, default="loss")
    direction = models.CharField(
        max_length=8, choices=Direction.choices, default=Direction.MINIMIZE
    )
    # The metric is reported to the pruner at every multiple of this step.
    report_every = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1)])
    # No trial is pruned before this step (median: warm-up; halving: the first rung).
    warmup_steps = models.PositiveIntegerField(default=10, validators=[MinValueValidator(1)])
    # Median: finished trials needed before any is pruned.
    startup_trials = models.PositiveIntegerField(default=2)
    max_trials = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    max_concurrent = models.PositiveIntegerField(default=2, validators=[MinValueValidator(1)])
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    # Why the last tick could not start a trial (a full quota, a lost account); "" when it could.
    message = models.TextField(blank=True)
    ticked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["state"], name="sweep_state_idx")]

    def __str__(self) -> str:
        return f"{self.name} ({self.project.slug})"


class Trial(models.Model):
    class State(models.TextChoices):
        RUNNING = "running", "Running"
        COMPLETE = "complete", "Complete"
        PRUNED = "pruned", "Pruned"
        FAILED = "failed", "Failed"
        STOPPED = "stopped", "Stopped"

    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="trials")
    number = models.PositiveIntegerField()
    params = models.JSONField()
    nodes = models.PositiveIntegerField()
    job = models.OneToOneField(
        Job, on_delete=models.SET_NULL, null=True, blank=True, related_name="sweep_trial"
    )
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    # {step: value} reported to the pruner (at multiples of report_every), JSON keys as text.
    intermediate = models.JSONField(default=dict, blank=True)
    # Optuna's own per-trial state (grid point, halving rungs), kept so a rebuild has it.
    system_attrs = models.JSONField(default=dict, blank=True)
    value = models.FloatField(null=True, blank=True)
    # Pruned because its metric went NaN or infinite or grew by orders of magnitude
    # (sweeps.divergence), not by the sweep's pruner.
    diverged = models.BooleanField(default=False)
    note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["sweep", "number"]
        constraints = [
            models.UniqueConstraint(fields=["sweep", "number"], name="trial_unique_number")
        ]

    def __str__(self) -> str:
        return f"trial {self.number} of sweep {self.sweep_id}"

    @property
    def state_label(self) -> str:
        """The state as the pages show it: a diverged trial apart from the pruner's."""
        return "Pruned (diverged)" if self.diverged else self.get_state_display()

    @property
    def last_step(self) -> int | None:
        return max((int(step) for step in self.intermediate), default=None)
