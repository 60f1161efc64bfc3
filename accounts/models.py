from django.conf import settings
from django.db import models
from django.utils import timezone


class PersonalToken(models.Model):
    """A user's API token; only a SHA-256 digest of its secret is kept."""

    class Scope(models.TextChoices):
        READ = "read", "Read"
        SUBMIT = "submit", "Read and submit"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personal_tokens"
    )
    name = models.CharField(max_length=100)
    # The token's visible start: how the user tells tokens apart and how a
    # request's token is found before its digest is compared.
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_expired(self) -> bool:
        return self.expires_at <= timezone.now()

    @property
    def is_usable(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def can_submit(self) -> bool:
        return self.scope == self.Scope.SUBMIT


class ExternalIdentity(models.Model):
    """A portal user as a single sign-on provider knows them: its issuer and their subject.

    The pair is the match at every sign-in (never the user name or the address, which a
    directory may reuse); the cluster user name is read from the provider each time.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identities"
    )
    # An OpenID provider's issuer URL, or `ldap:<user base DN>` for a directory.
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    # From the configured claim or attribute (SSO_USERNAME_CLAIM, LDAP_USERNAME_ATTRIBUTE);
    # empty when the provider gave none a cluster would take.
    cluster_username = models.CharField(max_length=32, blank=True)
    # The groups the provider gave at the last sign-in.
    groups = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_sign_in_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-last_sign_in_at", "-id"]
        verbose_name_plural = "external identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="external_identity_unique")
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class AccessChange(models.Model):
    """A portal user's access taken away or given back: when, by what, by whom and why.

    The audit trail of the directory sweep, of the sign-ins that readmit a person the sweep
    disabled, and of admins ticking or unticking "active" (docs/sso.md, "When access ends").
    The latest row also decides whether a sign-in may readmit an inactive user: only when
    the sweep, not an admin, disabled them.
    """

    class Source(models.TextChoices):
        DIRECTORY = "directory", "Directory sweep"
        SIGN_IN = "sign-in", "Sign-in"
        ADMIN = "admin", "Admin"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="access_changes"
    )
    at = models.DateTimeField(default=timezone.now)
    # What the change left: True, access given back; False, taken away.
    active = models.BooleanField()
    source = models.CharField(max_length=16, choices=Source.choices)
    # The admin who made it (source "admin").
    admin = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
    )
    reason = models.CharField(max_length=300)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["user", "-at", "-id"], name="access_change_latest")]

    def __str__(self) -> str:
        change = "given back" if self.active else "taken away"
        return f"{self.user}: access {change} by {self.get_source_display()}"
