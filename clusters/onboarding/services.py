"""Recording a cluster being onboarded, and running and keeping its readiness reports.

`cluster onboard` is what `manage.py cluster add` and the admin's Clusters -> Add both
do once the host key is confirmed: where Slurm is found, then the cluster recorded.
"""

from dataclasses import dataclass, field, replace
from datetime import timedelta

from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from clusters.access import can_check_readiness
from clusters.certificates.authorities import authority_signing
from clusters.models import Cluster, ReadinessReport
from clusters.onboarding.checks import Check
from clusters.onboarding.login import TIMEOUT, LoginEnvironment, login_environment
from clusters.onboarding.probe import PROBE_WAIT
from clusters.onboarding.report import Progress, readiness_report
from clusters.onboarding.slurm import ACCOUNTING
from clusters.selectors import portal_endpoint
from clusters.slurm.tools import DEFAULT_SLURM_BIN_DIR
from clusters.ssh import Connection, SSHError
from portal_lib.errors import PortalError
from portal_lib.queueing import queue_check, queue_on_commit

READINESS_TASK = "clusters.onboarding.tasks.cluster_readiness_check"
# A report still running after this long was lost (a worker died): another may start.
RUNNING_FOR_AT_MOST = timedelta(seconds=PROBE_WAIT + 300)


class OnboardingError(PortalError):
    """The cluster cannot be recorded as given; the message says what to change."""


@dataclass(frozen=True)
class NewCluster:
    """What `cluster add` was told, its host key confirmed."""

    host: str
    port: int
    host_key: str
    name: str = ""
    base_run_dir: str = ""
    operator_user: str = ""
    operator_key: str = ""
    slurm_bin_dir: str = ""
    slurm_conf: str = ""
    trusts_portal_ca: bool = False  # the operator logs in by certificate, with no key


@dataclass(frozen=True)
class Onboarded:
    """The cluster recorded, and what was learnt on the way (in plain words)."""

    cluster: Cluster
    notes: list[str] = field(default_factory=list)


def cluster_name_for(host: str) -> str:
    """A cluster name from its login node's host name: `login1.alps.cscs.ch` gives `login1`."""
    return slugify(host.split(".")[0] if not host.replace(".", "").isdigit() else host)[:64]


def operator_key_checked(text: str) -> str:
    """An unencrypted OpenSSH private key, as the admin's cluster form takes it."""
    key = text.strip()
    try:
        load_ssh_private_key(key.encode() + b"\n", password=None)
    except (ValueError, TypeError) as exc:
        raise OnboardingError(
            "The operator key is not an unencrypted OpenSSH private key (it should begin "
            "with '-----BEGIN OPENSSH PRIVATE KEY-----' and have no passphrase)."
        ) from exc
    return key + "\n"


def cluster_onboard(*, new: NewCluster) -> Onboarded:
    """Record a cluster whose host key was confirmed; where Slurm is, when not told, is
    read from the operator's login environment there (its login, certificate or key)."""
    _unsaved(new)  # refused before any login: a name taken, a bad key, a missing CA
    notes: list[str] = []
    if new.operator_user and not (new.slurm_bin_dir and new.slurm_conf):
        found, note = _login_environment(new)
        if note:
            notes.append(note)
        if found.slurm_conf and not new.slurm_conf:
            notes.append(f"The login environment sets SLURM_CONF={found.slurm_conf}.")
        new = replace(
            new,
            slurm_bin_dir=new.slurm_bin_dir or found.slurm_bin_dir,
            slurm_conf=new.slurm_conf or found.slurm_conf,
        )
    return Onboarded(cluster=cluster_add(new=new), notes=notes)


def _login_environment(new: NewCluster) -> tuple[LoginEnvironment, str]:
    """Where the operator's login shell finds Slurm, and why not when it could not be read."""
    none = LoginEnvironment(slurm_conf="", slurm_bin_dir="")
    endpoint = portal_endpoint(cluster=_unsaved(new))
    if endpoint is None:
        return none, ""
    try:
        with Connection(endpoint, connect_timeout=TIMEOUT) as connection:
            return login_environment(connection), ""
    except SSHError as exc:
        return none, f"Could not log in to read Slurm's settings there: {exc}"


@transaction.atomic
def cluster_add(*, new: NewCluster) -> Cluster:
    """Record the cluster and its portal (operator) account; refuse a name already taken."""
    cluster = _unsaved(new)
    cluster.save()
    return cluster


def _unsaved(new: NewCluster) -> Cluster:
    """The cluster as given, checked, not saved; OnboardingError says what to change."""
    name = new.name or cluster_name_for(new.host)
    if Cluster.objects.filter(name=name).exists():
        raise OnboardingError(
            f"A cluster named {name!r} exists already: check it with `cluster check {name}`, "
            "or give another name."
        )
    if new.operator_key and not new.operator_user:
        raise OnboardingError("Give the operator account's user name with its key.")
    if new.operator_user and not new.operator_key:
        if not new.trusts_portal_ca:
            raise OnboardingError(
                "Give the operator account's private key, or, where the cluster's login nodes "
                "trust the portal's CA (TrustedUserCAKeys), say so: it then logs in by "
                "certificate and needs no key."
            )
        if authority_signing() is None:
            raise OnboardingError(
                "The portal has no CA to sign the operator's certificate: run `manage.py "
                "ssh_ca create`, add `ssh_ca public-keys` to the login nodes' "
                "TrustedUserCAKeys file, then add the cluster again (or give its key)."
            )
    cluster = Cluster(
        name=name,
        ssh_host=new.host,
        ssh_port=new.port,
        host_key=new.host_key,
        portal_username=new.operator_user,
        portal_private_key=operator_key_checked(new.operator_key) if new.operator_key else "",
        slurm_bin_dir=new.slurm_bin_dir or DEFAULT_SLURM_BIN_DIR,
        slurm_conf=new.slurm_conf,
        trusts_portal_ca=new.trusts_portal_ca,
    )
    if new.base_run_dir:
        cluster.base_run_dir = new.base_run_dir
    try:
        cluster.full_clean()
    except ValidationError as exc:
        fields = "; ".join(
            f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items()
        )
        raise OnboardingError(f"The cluster cannot be recorded: {fields}") from exc
    return cluster


def readiness_check_now(
    *, cluster: Cluster, wait: float = PROBE_WAIT, progress: Progress | None = None
) -> ReadinessReport:
    """Run the report here and now (the command), and keep it."""
    report = ReadinessReport.objects.create(cluster=cluster)
    return _finish(report, readiness_report(cluster=cluster, wait=wait, progress=progress))


def readiness_check_request(
    *, cluster: Cluster, user: AbstractBaseUser | AnonymousUser, onboarding: bool = False
) -> ReadinessReport:
    """Queue a report (the cluster page's button, the admin's add); one running already is
    the answer. `onboarding`: a new cluster whose sacct answers then charges from it."""
    if not can_check_readiness(user=user):
        raise PermissionDenied("Only staff can check a cluster's readiness.")
    running = ReadinessReport.objects.filter(
        cluster=cluster,
        state=ReadinessReport.State.RUNNING,
        created_at__gte=timezone.now() - RUNNING_FOR_AT_MOST,
    ).first()
    if running is not None:
        return running
    queue_check("the readiness check")
    with transaction.atomic():
        report = ReadinessReport.objects.create(cluster=cluster, requested_by_id=user.pk)
        queue_on_commit(READINESS_TASK, report.pk, onboarding)
    return report


def readiness_check_run(*, report_id: int, onboarding: bool = False) -> None:
    """The queued report: run it once (a redelivered message finds it done)."""
    report = ReadinessReport.objects.select_related("cluster").get(pk=report_id)
    if report.state != ReadinessReport.State.RUNNING:
        return
    _finish(report, readiness_report(cluster=report.cluster))
    if onboarding:
        cluster_accounting_adopt(cluster=report.cluster, report=report)


def readiness_check_abandon(*, report_id: int, why: str) -> None:
    """A queued report that could not finish: it says so instead of running for ever."""
    report = ReadinessReport.objects.get(pk=report_id)
    if report.state == ReadinessReport.State.RUNNING:
        fix = "Run the check again; its test jobs were cancelled."
        _finish(report, [Check(name="Check stopped", passed=False, detail=why, fix=fix)])


def _finish(report: ReadinessReport, checks: list[Check]) -> ReadinessReport:
    report.checks = [check.as_json() for check in checks]
    report.state = ReadinessReport.State.DONE
    report.finished_at = timezone.now()
    report.save(update_fields=["checks", "state", "finished_at"])
    return report


def cluster_accounting_adopt(*, cluster: Cluster, report: ReadinessReport) -> bool:
    """A new cluster whose sacct answered charges from sacct; whether it does now."""
    answered = any(check["name"] == ACCOUNTING and check["passed"] for check in report.checks)
    if answered and not cluster.accounting_enabled:
        cluster.accounting_enabled = True
        cluster.save(update_fields=["accounting_enabled"])
    return answered
