from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
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
    max_concurrent_gpus = models.PositiveIntegerField(
        null=True, blank=True, help_text="Pending and running GPUs together; blank: no limit."
    )
    max_gpus_per_job = models.PositiveIntegerField(
        null=True, blank=True, help_text="Blank: no limit."
    )
    max_wall_time = models.DurationField(
        default=timedelta(hours=48), help_text="Longest time limit a job may ask for."
    )
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.project}: {self.gpu_hours_per_period} GPU-h per {self.period}"
