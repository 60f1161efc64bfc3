from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

slurm_name_validator = RegexValidator(
    r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$",
    "Use letters, digits, '_', '.' and '-' (Slurm account names allow no spaces or quotes).",
)


class Project(models.Model):
    slug = models.SlugField(max_length=64, unique=True)
    name = models.CharField(max_length=200)
    slurm_account = models.CharField(
        max_length=64,
        blank=True,
        validators=[slurm_name_validator],
        help_text="Passed to sbatch --account; leave blank to submit without an account.",
    )
    description = models.TextField(blank=True)
    code_quota_mib = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100 * 1024 * 1024)],
        verbose_name="code storage quota (MiB)",
        help_text="Code snapshots the project may keep; blank: the site default "
        "(CODE_QUOTA_BYTES).",
    )
    preflight_multi_node = models.BooleanField(
        default=False,
        verbose_name="preflight for multi-node jobs",
        help_text="Every job of more than one node checks each node (its GPUs, a small "
        "all-reduce) before its command; a faulty node is left out and the job resubmitted. "
        "A job may also ask for it itself.",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="projects"
    )

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        MEMBER = "member", "Member"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project", "user"]
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="membership_unique_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.project} ({self.role})"

    @property
    def can_submit(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.MEMBER)


class Quota(models.Model):
    class Period(models.TextChoices):
        MONTH = "month", "Monthly"
        QUARTER = "quarter", "Quarterly"
        YEAR = "year", "Yearly"

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="quota")
    gpu_hours_per_period = models.DecimalField(
        max_digits=12,
        decimal_places=2,
        default=Decimal("1000.00"),
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name="GPU-hour budget per period",
    )
    period = models.CharField(max_length=16, choices=Period.choices, default=Period.MONTH)
    # CPU and node hours are charged always. A new project gets a CPU-hour budget (16
    # CPUs per GPU of the GPU-hour default, so a GPU job meets its GPU budget first), as
    # CPU-only jobs would otherwise run without limit; quotas from before these limits
    # keep blank (no limit) until an admin sets them.
    cpu_hours_per_period = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        null=True,
        blank=True,
        default=Decimal("16000.00"),
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name="CPU-hour budget per period",
        help_text="CPUs x hours, CPU-only jobs included; blank: no limit.",
    )
    node_hours_per_period = models.DecimalField(
        max_digits=14,
        decimal_places=2,
        null=True,
        blank=True,
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name="node-hour budget per period",
        help_text="Nodes x hours; blank: no limit.",
    )
    max_concurrent_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pending and running GPUs together; blank: no limit."
    )
    max_concurrent_jobs = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MaxValueValidator(100_000)],
        help_text="Queued, pending and running jobs together; blank: no limit.",
    )
    max_gpus_per_job = models.PositiveIntegerField(
        null=True, blank=True, help_text="Blank: no limit."
    )
    max_wall_time = models.DurationField(
        default=timedelta(hours=48), help_text="Longest time limit a job may ask for."
    )
    allowed_clusters = models.ManyToManyField(
        "clusters.Cluster",
        blank=True,
        related_name="+",
        help_text="Clusters the project may submit to; none selected: all clusters.",
    )
    allowed_partitions = models.CharField(
        max_length=500,
        blank=True,
        help_text="Comma-separated partitions the project may use; blank: all partitions.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.project}: {self.gpu_hours_per_period} GPU-h per {self.period}"

    def partition_names(self) -> list[str]:
        return [name.strip() for name in self.allowed_partitions.split(",") if name.strip()]


class QuotaChange(models.Model):
    """Audit trail of quota edits: who changed which limit, when, from what to what."""

    quota = models.ForeignKey(Quota, on_delete=models.CASCADE, related_name="changes")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField()
    field = models.CharField(max_length=64)
    old_value = models.TextField(blank=True)
    new_value = models.TextField(blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.quota.project_id}: {self.field} {self.old_value} -> {self.new_value}"


class Reservation(models.Model):
    """GPU-, CPU- and node-hours an attempt holds against its project's budget until charged."""

    attempt = models.OneToOneField(
        "jobs.Attempt", on_delete=models.CASCADE, related_name="reservation"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="reservations")
    gpus = models.PositiveIntegerField()
    gpu_hours = models.DecimalField(max_digits=12, decimal_places=4)
    cpus = models.PositiveIntegerField(default=0)
    cpu_hours = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    nodes = models.PositiveIntegerField(default=0)
    node_hours = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    created_at = models.DateTimeField()
    # Set when the attempt reached a final state: its GPUs stop counting towards
    # the concurrency limit, its hours still count until the charge is written.
    ended_at = models.DateTimeField(null=True, blank=True)
    released_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            models.Index(
                fields=["project"],
                condition=models.Q(released_at__isnull=True),
                name="reservation_held",
            )
        ]

    def __str__(self) -> str:
        return f"{self.gpu_hours} GPU-h for attempt {self.attempt_id}"


class ImmutableError(Exception):
    pass


class UsageCharge(models.Model):
    """The ledger: GPU-, CPU- and node-hours one attempt really used. Written once."""

    class Source(models.TextChoices):
        SACCT = "sacct", "Slurm accounting (sacct)"
        PORTAL = "portal", "Portal's start and end times"

    attempt = models.OneToOneField(
        "jobs.Attempt", on_delete=models.PROTECT, related_name="usage_charge"
    )
    project = models.ForeignKey(Project, on_delete=models.PROTECT, related_name="charges")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="usage_charges"
    )
    cluster = models.ForeignKey(
        "clusters.Cluster", on_delete=models.PROTECT, related_name="usage_charges"
    )
    gpus = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    # The charge belongs to the period its attempt ended in.
    ended_at = models.DateTimeField()
    elapsed_seconds = models.PositiveIntegerField()
    gpu_hours = models.DecimalField(max_digits=12, decimal_places=4)
    # Charges written before CPU and node hours were counted have zeros here.
    cpus = models.PositiveIntegerField(default=0)
    cpu_hours = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    nodes = models.PositiveIntegerField(default=0)
    node_hours = models.DecimalField(max_digits=14, decimal_places=4, default=Decimal(0))
    cost = models.DecimalField(max_digits=14, decimal_places=4)
    source = models.CharField(max_length=16, choices=Source.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-ended_at", "-id"]
        indexes = [
            models.Index(fields=["project", "ended_at"], name="charge_project_ended"),
            models.Index(fields=["ended_at"], name="charge_ended"),
        ]

    def __str__(self) -> str:
        return f"{self.gpu_hours} GPU-h, {self.project} (attempt {self.attempt_id})"

    def save(self, *args: object, **kwargs: object) -> None:
        if self.pk is not None:
            raise ImmutableError("A usage charge is never changed; write a new one.")
        super().save(*args, **kwargs)

    def delete(self, *args: object, **kwargs: object) -> tuple[int, dict[str, int]]:
        raise ImmutableError("A usage charge is never deleted.")


class BudgetAlert(models.Model):
    """A budget threshold mail sent for a project in a period: at most one of each."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="budget_alerts")
    period_start = models.DateTimeField()
    threshold = models.PositiveSmallIntegerField(help_text="Percent of the budget.")
    used_gpu_hours = models.DecimalField(max_digits=12, decimal_places=4)
    sent_at = models.DateTimeField()

    class Meta:
        ordering = ["-sent_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["project", "period_start", "threshold"], name="budgetalert_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.project} reached {self.threshold} % ({self.period_start:%Y-%m-%d})"


class NotificationPreference(models.Model):
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    mail_on_job_end = models.BooleanField(
        default=False, verbose_name="e-mail me when my job ends or fails"
    )

    def __str__(self) -> str:
        return f"{self.user}: mail on job end {'on' if self.mail_on_job_end else 'off'}"


MIN_IDLE_WINDOW = timedelta(seconds=10)


class IdlePolicy(models.Model):
    """What the portal does with a job whose GPUs sit idle: warn, then optionally cancel.

    Set by admins per project. A running attempt whose GPUs all stay under
    `threshold_percent` utilisation (the portal's own GPU samples) for `warn_after`
    is warned on its page and by mail; if `cancel_after` is set and they stay idle
    that much longer, the attempt is cancelled.
    """

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="idle_policy")
    threshold_percent = models.PositiveSmallIntegerField(
        default=10,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        verbose_name="idle under (% utilisation)",
        help_text="A GPU under this utilisation counts as idle.",
    )
    warn_after = models.DurationField(
        default=timedelta(hours=1),
        validators=[MinValueValidator(MIN_IDLE_WINDOW)],
        help_text="Warn once a job's GPUs have all been idle this long (at least 10 s).",
    )
    cancel_after = models.DurationField(
        null=True,
        blank=True,
        validators=[MinValueValidator(MIN_IDLE_WINDOW)],
        help_text="Cancel a warned job still idle this much longer; blank: never cancel.",
    )

    class Meta:
        verbose_name_plural = "idle policies"

    def __str__(self) -> str:
        cancel = f", cancel {self.cancel_after} later" if self.cancel_after else ""
        return f"{self.project}: under {self.threshold_percent} % for {self.warn_after}{cancel}"
