"""The portal's own operator account logging in by certificate against the sandbox's real
sshd: where the cluster trusts the portal's CA, squeue and sacct run as portal-svc with no
key stored, and the poll follows a job to COMPLETED through the real Celery worker."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from clusters.certificates.authorities import sandbox_trust_path, trust_owner
from clusters.certificates.trust_file import trusted_keys_write
from clusters.models import CertificateAuthority, Cluster, ClusterAccount
from clusters.selectors import account_endpoint, portal_endpoint
from clusters.slurm import Slurm
from clusters.ssh import Connection, SSHError
from jobs.enums import State
from jobs.models import Attempt
from jobs.services import job_submit
from projects.models import Project
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, sbatch, slurm_name, wait_for

pytestmark = pytest.mark.sandbox


def _operator_by_certificate(cluster: Cluster) -> Cluster:
    """The cluster trusting the portal's CA, its portal account holding no key."""
    cluster.trusts_portal_ca = True
    cluster.portal_private_key = ""
    cluster.save(update_fields=["trusts_portal_ca", "portal_private_key"])
    return cluster


def _no_key_anywhere() -> None:
    """No Cluster or ClusterAccount row holds a private key (read through the model, so
    the decrypted value is what is checked)."""
    assert [c.name for c in Cluster.objects.all() if c.portal_private_key] == []
    assert [str(a) for a in ClusterAccount.objects.all() if a.private_key] == []


def test_the_operators_squeue_and_sacct_work_by_certificate_with_no_stored_key(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority, sandbox_info
) -> None:
    cluster = _operator_by_certificate(sandbox_cluster)
    assert cluster.has_portal_account and cluster.trust_warning == ""
    endpoint = portal_endpoint(cluster=cluster)
    assert endpoint is not None and endpoint.issuer is not None and endpoint.private_key == ""
    alice = ClusterAccount.objects.select_related("cluster").get(cluster=cluster, username="alice")
    name = slurm_name("operator-cert")
    with Connection(account_endpoint(account=alice)) as shell:
        job_id = sbatch(shell, f"--job-name={name} --partition=gpu --time=1 --wrap=true")
    with Connection(endpoint) as connection:
        assert connection.run("id -un").text.strip() == sandbox_info.portal_user
        slurm = Slurm(connection, tools=cluster.slurm_tools)
        wait_for(
            lambda: not slurm.queue([job_id]) or slurm.queue([job_id])[0].state == "COMPLETED",
            QUEUE_WAIT,
            "alice's job to leave the queue",
        )
        if sandbox_info.accounting:
            since = timezone.now() - timedelta(hours=1)
            wait_for(
                lambda: [r.state for r in slurm.history([job_id], since=since)] == ["COMPLETED"],
                60,
                "sacct, run as the operator, to record alice's job as COMPLETED",
            )


def test_without_the_cas_trust_the_operators_certificate_is_refused_naming_the_fix(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority
) -> None:
    cluster = _operator_by_certificate(sandbox_cluster)
    trusted_keys_write(path=sandbox_trust_path(), owner=trust_owner(), lines=[])
    endpoint = portal_endpoint(cluster=cluster)
    assert endpoint is not None
    with pytest.raises(SSHError) as refused:
        Connection(endpoint).close()
    assert "TrustedUserCAKeys" in str(refused.value)


def test_a_job_is_followed_to_completed_with_no_private_key_in_the_database(
    celery_worker: object,
    researcher: User,
    project: Project,
    certificate_logins: Cluster,
) -> None:
    cluster = _operator_by_certificate(certificate_logins)
    ClusterAccount.objects.filter(cluster=cluster, user__isnull=True).delete()
    _no_key_anywhere()
    job = job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(command="echo done", gpus_per_node=0, time_limit=timedelta(minutes=2)),
    )
    wait_for(
        lambda: Attempt.objects.get(job=job, number=1).state == State.COMPLETED,
        QUEUE_WAIT,
        "the poll, as the operator by certificate, to follow the job to COMPLETED",
    )
    attempt = Attempt.objects.get(job=job, number=1)
    assert attempt.slurm_job_id and attempt.exit_code == 0
    _no_key_anywhere()
