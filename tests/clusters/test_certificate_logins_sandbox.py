"""Logins without stored keys against the sandbox's real sshd: certificates signed by the
portal's CA (expired, retired, rotated, another user's), the self-service key's line, a
revoked user's next job, and `up` giving a running sshd the CA line without a restart."""

import html
import pwd
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import paramiko
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters import sandbox
from clusters.certificates.authorities import (
    authorities_publish,
    authority_create,
    authority_retire,
    authority_rotate,
    authority_signing,
    sandbox_trust_path,
    trust_owner,
)
from clusters.certificates.signing import (
    certificate_line,
    load_private_text,
    new_private_key,
    private_text,
    terms_for,
    user_certificate,
)
from clusters.certificates.trust_file import trusted_keys_write
from clusters.models import Authentication, CertificateAuthority, Cluster, ClusterAccount
from clusters.sandbox import daemons
from clusters.sandbox.config import Paths
from clusters.selectors import account_endpoint, portal_endpoint
from clusters.ssh import Connection, Endpoint, LoginKey, SSHError
from jobs.enums import State
from jobs.errors import JobPermissionRefused
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_submit
from tests.factories import spec
from tests.fixtures.sandbox import sandbox_setup
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox


def _by_certificate(cluster: Cluster, username: str) -> ClusterAccount:
    account = ClusterAccount.objects.select_related("cluster").get(
        cluster=cluster, username=username
    )
    account.authentication = Authentication.CERTIFICATE
    account.private_key = ""
    account.save()
    return account


def _signed(
    cluster: Cluster,
    username: str,
    authority: CertificateAuthority,
    *,
    principal: str = "",
    ago: timedelta = timedelta(0),
    lifetime: timedelta = timedelta(minutes=5),
) -> Endpoint:
    """An endpoint that logs in with one certificate signed by `authority`, as given."""
    key = new_private_key()
    terms = terms_for(
        principal=principal or username,
        key_id="test",
        now=timezone.now() - ago,
        lifetime=lifetime,
    )
    certificate = user_certificate(
        ca=load_private_text(authority.private_key), key=key, terms=terms
    )
    login = LoginKey(private_key=private_text(key), certificate=certificate_line(certificate))
    return Endpoint(
        cluster_name=cluster.name,
        host=cluster.ssh_host,
        port=cluster.ssh_port,
        host_key=cluster.host_key,
        username=username,
        issuer=lambda: login,
    )


def _logs_in(endpoint: Endpoint) -> bool:
    try:
        with Connection(endpoint) as connection:
            return connection.run("id -un").text.strip() == endpoint.username
    except SSHError as exc:
        assert exc.retryable is False, exc  # refused, not unreachable
        return False


def test_alice_with_no_private_key_logs_in_by_certificate_as_alice(
    certificate_logins: Cluster, client: Client
) -> None:
    sandbox_cluster = certificate_logins
    accounts = ClusterAccount.objects.filter(cluster=sandbox_cluster, user__isnull=False)
    assert set(accounts.values_list("private_key", flat=True)) == {""}
    account = accounts.select_related("cluster").get(username="alice")
    with Connection(account_endpoint(account=account)) as connection:
        assert connection.run("id -u").text.strip() == str(pwd.getpwnam("alice").pw_uid)
        assert connection.run("id -un").text.strip() == "alice"
        connection.upload("cert-probe.txt", b"by certificate\n")  # SFTP works too
        assert connection.run("cat cert-probe.txt && rm cert-probe.txt").text == "by certificate\n"
        # The certificate grants no port forwarding (nor agent, X11 or pty).
        with pytest.raises(paramiko.ChannelException):
            connection._transport.open_channel(
                "direct-tcpip", (sandbox_cluster.ssh_host, sandbox_cluster.ssh_port), ("", 0)
            )
    # Her key page's test says so in plain words.
    client.force_login(User.objects.get(username="alice"))
    tested = client.post(reverse("login-key", args=[sandbox_cluster.name]), {"action": "test"})
    assert "It works: the portal logged in to sandbox as alice." in tested.content.decode()


def test_a_login_node_that_does_not_trust_the_ca_is_named_on_the_key_page(
    sandbox_cluster: Cluster, client: Client
) -> None:
    _by_certificate(sandbox_cluster, "alice")
    authority_create()  # not in the login node's TrustedUserCAKeys file
    client.force_login(User.objects.get(username="alice"))
    tested = client.post(reverse("login-key", args=[sandbox_cluster.name]), {"action": "test"})
    words = html.unescape(tested.content.decode())
    assert "sandbox refused the portal's certificate for alice" in words
    assert "TrustedUserCAKeys" in words


def test_an_expired_certificate_is_refused(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority
) -> None:
    expired = _signed(
        sandbox_cluster,
        "alice",
        portal_ca,
        ago=timedelta(minutes=30),
        lifetime=timedelta(minutes=10),
    )
    assert not _logs_in(expired)
    assert _logs_in(_signed(sandbox_cluster, "alice", portal_ca))  # the same CA, valid now


def test_a_certificate_for_alice_cannot_log_in_as_bob(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority
) -> None:
    assert not _logs_in(_signed(sandbox_cluster, "bob", portal_ca, principal="alice"))
    assert _logs_in(_signed(sandbox_cluster, "bob", portal_ca))


def test_both_cas_log_in_during_a_rotation_and_a_retired_one_is_refused(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority
) -> None:
    sshd = next(
        d for d in daemons.daemons(Paths.of(settings.SANDBOX_STATE_DIR)) if d.name == "sshd"
    )
    pid = daemons.running_pid(sshd)
    newer = authority_rotate()
    authorities_publish(path=sandbox_trust_path())
    assert _logs_in(_signed(sandbox_cluster, "alice", portal_ca))
    assert _logs_in(_signed(sandbox_cluster, "alice", newer))
    account = _by_certificate(sandbox_cluster, "alice")
    assert _logs_in(account_endpoint(account=account))  # signed by the older one

    authority_retire()  # the older
    authorities_publish(path=sandbox_trust_path())
    assert not _logs_in(_signed(sandbox_cluster, "alice", portal_ca))
    assert _logs_in(_signed(sandbox_cluster, "alice", newer))
    assert _logs_in(account_endpoint(account=account))  # the newer signs now
    # sshd read the rewritten file at each login: it was neither restarted nor reloaded.
    assert daemons.running_pid(sshd) == pid


@pytest.fixture
def alices_authorized_keys() -> Iterator[Path]:
    """alice's authorized_keys, given back as it was (other tests log in with its lines)."""
    path = Path(pwd.getpwnam("alice").pw_dir) / ".ssh" / "authorized_keys"
    before = path.read_text()
    yield path
    with sandbox_setup(settings.SANDBOX_STATE_DIR):  # `up` rewrites the file under it
        kept = [ln for ln in path.read_text().splitlines() if "portal@sandbox:alice" not in ln]
        path.write_text("".join(f"{ln}\n" for ln in kept))
    assert set(path.read_text().splitlines()) >= set(before.splitlines())


def test_the_self_service_line_logs_in_once_pasted_and_the_page_never_shows_the_key(
    client: Client, sandbox_cluster: Cluster, alices_authorized_keys: Path
) -> None:
    account = ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice")
    account.authentication = Authentication.INSTALLED_KEY
    account.private_key = ""
    account.save()
    client.force_login(User.objects.get(username="alice"))
    page_url = reverse("login-key", args=[sandbox_cluster.name])
    client.post(page_url, {"action": "make"})
    page = client.get(page_url).content.decode()
    found = re.search(r'<code id="authorized-keys-line">([^<]+)</code>', page)
    assert found, page
    line = html.unescape(found[1])
    assert line.startswith('restrict,from="127.0.0.1,::1" ssh-ed25519 ')
    account.refresh_from_db()
    body = [ln for ln in account.private_key.splitlines() if ln and "-----" not in ln]
    assert body and not any(part in page for part in body)

    before = client.post(page_url, {"action": "test"}).content.decode()
    assert "refused the key for alice" in html.unescape(before)
    assert account.private_key not in before

    with sandbox_setup(settings.SANDBOX_STATE_DIR), alices_authorized_keys.open("a") as handle:
        handle.write(f"{line}\n")
    after = client.post(page_url, {"action": "test"}).content.decode()
    assert "It works: the portal logged in to sandbox as alice." in after
    for part in body:
        assert part not in after
    with Connection(account_endpoint(account=account)) as connection:
        assert connection.run("id -u").text.strip() == str(pwd.getpwnam("alice").pw_uid)
        connection.upload("key-probe.txt", b"by the pasted key\n")  # SFTP, as a submission
        assert connection.run("cat key-probe.txt && rm key-probe.txt").text == "by the pasted key\n"
        # `restrict`: no port forwarding through the pasted key either.
        with pytest.raises(paramiko.ChannelException):
            connection._transport.open_channel(
                "direct-tcpip", (sandbox_cluster.ssh_host, sandbox_cluster.ssh_port), ("", 0)
            )


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def test_a_deactivated_user_cannot_start_a_job_a_minute_later(
    celery_worker, researcher: User, project, sandbox_cluster: Cluster, portal_ca
) -> None:
    _by_certificate(sandbox_cluster, "alice")
    first = job_submit(
        user=researcher, project=project, cluster=sandbox_cluster, spec=spec(command="id -u")
    )
    wait_for(
        lambda: _attempt(first).state not in (State.QUEUED, State.SUBMITTING),
        QUEUE_WAIT,
        "the worker to submit alice's first job by certificate",
    )
    assert _attempt(first).slurm_job_id, _attempt(first).state

    # An admin, or the directory, revokes alice in the transaction that queues a job of
    # hers: the worker, which holds her pooled connection, is handed it after the revocation.
    with transaction.atomic():
        second = job_submit(
            user=researcher, project=project, cluster=sandbox_cluster, spec=spec(command="id -u")
        )
        researcher.is_active = False
        researcher.save(update_fields=["is_active"])
    wait_for(lambda: _attempt(second).state == State.FAILED, QUEUE_WAIT, "the revoked job to fail")
    attempt = _attempt(second)
    assert attempt.slurm_job_id == ""
    reason = JobEvent.objects.filter(attempt=attempt, to_state=State.FAILED).get().reason
    assert "'alice' is inactive" in reason and "no connection" in reason
    # And the portal takes no new job of hers.
    with pytest.raises(JobPermissionRefused):
        job_submit(user=researcher, project=project, cluster=sandbox_cluster, spec=spec())


@pytest.mark.sandbox_exclusive
def test_up_gives_a_running_sshd_the_ca_line_by_a_reload_that_keeps_sessions(
    sandbox_cluster: Cluster, portal_ca: CertificateAuthority, alice: Connection
) -> None:
    paths = Paths.of(settings.SANDBOX_STATE_DIR)
    sshd = next(d for d in daemons.daemons(paths) if d.name == "sshd")
    pid = daemons.running_pid(sshd)
    certificate = _by_certificate(sandbox_cluster, "bob")
    # An sshd that an older checkout's `up` configured: no TrustedUserCAKeys.
    current = paths.sshd_config.read_text()
    older = "".join(
        line
        for line in current.splitlines(keepends=True)
        if not line.startswith(("TrustedUserCAKeys ", "AuthorizedPrincipalsFile "))
    )
    with sandbox_setup(settings.SANDBOX_STATE_DIR):
        try:
            paths.sshd_config.write_text(older)
            daemons.reload_sshd(sshd, paths)
            assert not _logs_in(account_endpoint(account=certificate))
            sandbox.up(settings.SANDBOX_STATE_DIR)
        finally:
            if paths.sshd_config.read_text() != current:  # `up` failed: as it was
                paths.sshd_config.write_text(current)
                daemons.reload_sshd(sshd, paths)
    assert paths.sshd_config.read_text() == current
    assert f"TrustedUserCAKeys {paths.trusted_user_ca_keys}" in current.splitlines()
    assert daemons.running_pid(sshd) == pid  # reloaded, not restarted
    assert alice.run("echo still here").text == "still here\n"  # the open session went on
    assert _logs_in(account_endpoint(account=certificate))


def test_sandbox_up_with_certificates_registers_users_and_the_operator_holding_no_key(
    db: None, sandbox_info, capsys
) -> None:
    try:
        with sandbox_setup(settings.SANDBOX_STATE_DIR):
            call_command("sandbox", "up", "--certificates")
        cluster = Cluster.objects.get(name="sandbox")
        accounts = cluster.accounts.all()
        assert {(a.authentication, a.private_key) for a in accounts} == {("certificate", "")}
        # The portal's operator account too: the cluster trusts the CA, no key is stored.
        assert cluster.trusts_portal_ca and cluster.portal_private_key == ""
        operator = portal_endpoint(cluster=cluster)
        assert operator is not None and operator.issuer is not None
        with Connection(operator) as connection:
            assert connection.run("id -un").text.strip() == cluster.portal_username
        signer = authority_signing()  # made, as there was none
        assert signer is not None
        trusted = sandbox_trust_path().read_text().split()
        assert signer.public_key.split()[1] in trusted
        # The README's example went into alice's home over a certificate login.
        assert "Example trainer for alice: ~/portal-examples" in capsys.readouterr().out
    finally:
        trusted_keys_write(path=sandbox_trust_path(), owner=trust_owner(), lines=[])
