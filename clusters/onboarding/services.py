"""Recording a cluster being onboarded, and running and keeping its readiness reports."""

from dataclasses import dataclass
from datetime import timedelta

from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from clusters.access import can_check_readiness
from clusters.models import Cluster, ReadinessReport
from clusters.onboarding.checks import Check
from clusters.onboarding.probe import PROBE_WAIT
from clusters.onboarding.report import Progress, readiness_report
from clusters.onboarding.slurm import ACCOUNTING
from clusters.slurm.tools import DEFAULT_SLURM_BIN_DIR
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


@transaction.atomic
def cluster_add(*, new: NewCluster) -> Cluster:
    """Record the cluster and its portal (operator) account; refuse a name already taken."""
    name = new.name or cluster_name_for(new.host)
    if Cluster.objects.filter(name=name).exists():
        raise OnboardingError(
            f"A cluster named {name!r} exists already: check it with `cluster check {name}`, "
            "or give another --name."
        )
    if bool(new.operator_user) != bool(new.operator_key):
        raise OnboardingError("Give the operator account's user and its key together.")
    cluster = Cluster(
        name=name,
        ssh_host=new.host,
        ssh_port=new.port,
        host_key=new.host_key,
        portal_username=new.operator_user,
        portal_private_key=operator_key_checked(new.operator_key) if new.operator_key else "",
        slurm_bin_dir=new.slurm_bin_dir or DEFAULT_SLURM_BIN_DIR,
        slurm_conf=new.slurm_conf,
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
    cluster.save()
    return cluster


def readiness_check_now(
    *, cluster: Cluster, wait: float = PROBE_WAIT, progress: Progress | None = None
) -> ReadinessReport:
    """Run the report here and now (the command), and keep it."""
    report = ReadinessReport.objects.create(cluster=cluster)
    return _finish(report, readiness_report(cluster=cluster, wait=wait, progress=progress))


def readiness_check_request(
    *, cluster: Cluster, user: AbstractBaseUser | AnonymousUser
) -> ReadinessReport:
    """Queue a report for the cluster page's button; one running already is the answer."""
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
        queue_on_commit(READINESS_TASK, report.pk)
    return report


def readiness_check_run(*, report_id: int) -> None:
    """The queued report: run it once (a redelivered message finds it done)."""
    report = ReadinessReport.objects.select_related("cluster").get(pk=report_id)
    if report.state != ReadinessReport.State.RUNNING:
        return
    _finish(report, readiness_report(cluster=report.cluster))


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
