from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q
from django.utils import timezone

from clusters.hostkeys import fingerprint, parse_host_key, validate_host_key
from clusters.slurm.tools import DEFAULT_SLURM_BIN_DIR, SlurmTools
from portal_lib.crypto import EncryptedTextField

POSIX_USER_NAME = RegexValidator(
    r"^[a-z_][a-z0-9_.-]*$", "A POSIX user name: lower-case letters, digits, '_', '.', '-'."
)
ABSOLUTE_PATH = RegexValidator(
    r"^/[A-Za-z0-9_.+/-]*$", "An absolute path of letters, digits and '_.+-/' only."
)


class SessionReach(models.TextChoices):
    """How the portal reaches a session's server on its node's loopback (jobs.session_reach)."""

    SRUN_RELAY = "srun", "srun relay: a step of the session's job on its node"
    TUNNEL = "tunnel", "SSH tunnel: the login node and the compute nodes are one host"


class Cluster(models.Model):
    name = models.SlugField(max_length=64, unique=True)
    ssh_host = models.CharField(max_length=255, verbose_name="SSH host")
    ssh_port = models.PositiveIntegerField(
        default=22, validators=[MaxValueValidator(65535)], verbose_name="SSH port"
    )
    host_key = models.TextField(
        validators=[validate_host_key],
        help_text="The login node's public host key (one line, as `ssh-keyscan` prints it). "
        "Connections presenting any other key are refused.",
    )
    base_run_dir = models.CharField(
        max_length=255,
        default="~/portal-runs",
        help_text="Where attempts' run directories are made, on a filesystem shared by all "
        "nodes; `~` is the cluster account's home.",
    )
    default_partition = models.CharField(max_length=64, blank=True)
    gpu_model = models.CharField(max_length=64, blank=True, verbose_name="GPU model")
    gpu_peak_bf16_tflops = models.FloatField(
        default=0,
        validators=[MinValueValidator(0)],
        verbose_name="GPU peak dense bf16 TFLOP/s",
        help_text="Per GPU; the denominator of MFU.",
    )
    price_per_gpu_hour = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name="price per GPU-hour",
    )
    price_per_cpu_hour = models.DecimalField(
        max_digits=10,
        decimal_places=4,
        default=Decimal("0"),
        validators=[MinValueValidator(Decimal("0"))],
        verbose_name="price per CPU-hour",
        help_text="Added to a job's cost for each CPU-hour, GPU jobs' CPUs included.",
    )
    is_active = models.BooleanField(default=True, verbose_name="active")
    trusts_portal_ca = models.BooleanField(
        default=False,
        verbose_name="trusts the portal's CA",
        help_text="The login nodes' sshd has the portal's CA in TrustedUserCAKeys: a person "
        "signing in through single sign-on gets a certificate account here, as their "
        "cluster user name, with no stored key.",
    )
    accounting_enabled = models.BooleanField(
        default=False,
        verbose_name="Slurm accounting",
        help_text="The cluster runs slurmdbd: charge GPU-hours from sacct's elapsed time "
        "(else from the portal's start and end times).",
    )
    mirror_quotas = models.BooleanField(
        default=False,
        verbose_name="mirror quotas into Slurm",
        help_text="Apply projects' budgets (GPU-, CPU- and node-hours as GrpTRESMins, "
        "concurrent GPUs and jobs) with sacctmgr (needs accounting and an operator account).",
    )
    # The portal's own login: no job runs as it, so what it reads is the truth about
    # state and accounting (a tenant's own session is only a hint).
    portal_username = models.CharField(
        max_length=32,
        blank=True,
        validators=[POSIX_USER_NAME],
        verbose_name="portal account",
        help_text="A login on the cluster that only the portal uses (no job runs as it), e.g. "
        "portal-svc; job state, accounting and cluster status are read as it. It must see "
        "every user's jobs (a Slurm operator where PrivateData hides them). Blank: read "
        "through the users' own accounts, which their jobs can tamper with.",
    )
    portal_private_key = EncryptedTextField(
        blank=True, help_text="The portal account's OpenSSH private key; encrypted at rest."
    )
    slurm_bin_dir = models.CharField(
        max_length=255,
        default=DEFAULT_SLURM_BIN_DIR,
        validators=[ABSOLUTE_PATH],
        verbose_name="Slurm bin directory",
        help_text="Where squeue, sbatch, sacct and scontrol are on the login node; they are run "
        "by this absolute path in a clean environment, never looked up on a user's PATH.",
    )
    slurm_conf = models.CharField(
        max_length=255,
        blank=True,
        validators=[ABSOLUTE_PATH],
        verbose_name="SLURM_CONF",
        help_text="slurm.conf's path when it is not Slurm's built-in default.",
    )
    session_reach = models.CharField(
        max_length=16,
        choices=SessionReach.choices,
        default=SessionReach.SRUN_RELAY,
        verbose_name="session reach",
        help_text="How JupyterLab sessions are reached on their node's loopback: a relay in a "
        "step of the session's own job (`srun --overlap`, as its owner; works on any cluster "
        "with python3 on the nodes), or a direct-tcpip tunnel from the login node, which "
        "reaches a node's loopback only where the login node is that node, and needs port "
        "forwarding (certificate and installed-key logins have none).",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def host_key_fingerprint(self) -> str:
        try:
            return fingerprint(*parse_host_key(self.host_key))
        except ValidationError:
            return "(not a valid host key)"

    @property
    def slurm_tools(self) -> SlurmTools:
        return SlurmTools(bin_dir=self.slurm_bin_dir, conf=self.slurm_conf)

    @property
    def has_portal_account(self) -> bool:
        """An operator login: a certificate where the cluster trusts the CA, else a key."""
        return bool(self.portal_username and (self.trusts_portal_ca or self.portal_private_key))

    @property
    def trust_warning(self) -> str:
        """Why this cluster's state and billing can be tampered with; empty when they cannot."""
        if self.has_portal_account:
            return ""
        return (
            "No portal account: job state, accounting and cluster status are read through "
            "the users' own logins, which their jobs can tamper with. Add a login only the "
            "portal uses (e.g. portal-svc) under Cluster > portal account."
        )


class Authentication(models.TextChoices):
    """How the portal logs in to a cluster account, the first that a site allows."""

    CERTIFICATE = "certificate", "certificate signed by the portal's CA (no stored key)"
    INSTALLED_KEY = "installed_key", "key made by the portal, installed by the user"
    STORED_KEY = "stored_key", "private key pasted by an admin (last resort)"


class ClusterAccount(models.Model):
    """A login on a cluster; a job runs as its submitter's account, else the shared one."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="accounts")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="cluster_accounts",
        help_text="Leave blank for the cluster's shared service account.",
    )
    username = models.CharField(
        max_length=32,
        validators=[POSIX_USER_NAME],
        help_text="The user name on the cluster.",
    )
    authentication = models.CharField(
        max_length=16,
        choices=Authentication.choices,
        default=Authentication.STORED_KEY,
        help_text="Certificate: the login node trusts the portal's CA (sshd's "
        "TrustedUserCAKeys) and nothing is stored. Installed key: the user adds the line "
        "from their cluster logins page to ~/.ssh/authorized_keys. Stored key: an admin "
        "pastes a private key below.",
    )
    private_key = EncryptedTextField(
        blank=True,
        help_text="OpenSSH private key (pasted, or made by the portal for the user to "
        "install); encrypted at rest; empty for certificates.",
    )
    key_made_at = models.DateTimeField(
        null=True, blank=True, help_text="When the portal made the installed key."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["cluster", "username"]
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "user"],
                condition=Q(user__isnull=False),
                name="clusteraccount_one_per_user",
            ),
            models.UniqueConstraint(
                fields=["cluster"],
                condition=Q(user__isnull=True),
                name="clusteraccount_one_service_account",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.username}@{self.cluster}"

    @property
    def is_service_account(self) -> bool:
        return self.user_id is None


class ReadinessReport(models.Model):
    """One run of a cluster's readiness checks (clusters.onboarding); the newest is shown."""

    class State(models.TextChoices):
        RUNNING = "running"
        DONE = "done"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="readiness")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.RUNNING)
    # [{"name", "passed", "detail", "fix"}, ...] in the order the checks ran.
    checks = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"readiness of {self.cluster} at {self.created_at:%Y-%m-%d %H:%M}"

    @property
    def passed(self) -> bool:
        return self.state == self.State.DONE and all(check["passed"] for check in self.checks)


class CertificateAuthority(models.Model):
    """A key the portal signs users' SSH certificates with; login nodes trust its public half.

    At most two are valid at once, during a rotation; the older one signs until it is
    retired (every login node already trusts it).
    """

    private_key = EncryptedTextField(help_text="The CA's OpenSSH private key; encrypted at rest.")
    public_key = models.TextField(help_text="The line for sshd's TrustedUserCAKeys file.")
    created_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["created_at", "id"]
        verbose_name = "SSH certificate authority"
        verbose_name_plural = "SSH certificate authorities"

    def __str__(self) -> str:
        state = "retired" if self.retired_at else "valid"
        return f"CA {self.pk} ({state}, {self.public_key.split()[0]})"

    @property
    def fingerprint(self) -> str:
        return fingerprint(*parse_host_key(self.public_key))


class AvoidedNode(models.Model):
    """A period in which new submissions to a cluster leave a node out (sbatch --exclude).

    The node health ledger (monitoring.nodes) opens one when it judges a node bad; an
    admin pins a node (no end) or clears it (the period ends, and the ledger forgets the
    node's evidence from before). Ended periods stay: they are the node's history.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="avoided_nodes")
    node = models.CharField(max_length=64)
    reason = models.TextField()
    since = models.DateTimeField(default=timezone.now)
    until = models.DateTimeField(null=True, blank=True, help_text="Blank: pinned, no end.")
    pinned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    cleared_at = models.DateTimeField(null=True, blank=True)
    cleared_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-since", "-id"]
        indexes = [models.Index(fields=["cluster", "node", "-since"], name="avoidednode_history")]

    def __str__(self) -> str:
        return f"{self.node} of {self.cluster} avoided since {self.since:%Y-%m-%d %H:%M}"

    def is_active(self, at: datetime) -> bool:
        if self.since > at or (self.cleared_at is not None and self.cleared_at <= at):
            return False
        return self.until is None or self.until > at


class SubmissionAvoidance(models.Model):
    """Which avoided nodes one submission (an attempt, by its UUID) left out and why, and
    why it kept any it could not leave out (the job would no longer fit)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    attempt_uuid = models.UUIDField(unique=True)
    # {node: why it was avoided}, worst first.
    nodes = models.JSONField(default=dict, blank=True)
    kept_note = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"submission {self.attempt_uuid} without {', '.join(self.nodes) or 'no node'}"
