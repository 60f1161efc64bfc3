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
