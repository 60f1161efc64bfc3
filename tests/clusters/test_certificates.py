"""SSH user certificates and the logins built from accounts, without a cluster: the
builder's options, the CAs' rotation rules, the trusted keys' file, revoked users."""

from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    SSHCertificate,
    SSHCertificateType,
    load_ssh_public_identity,
)
from django.core.exceptions import ImproperlyConfigured
from django.core.management import CommandError, call_command
from django.db import connection

from clusters.certificates.authorities import (
    AuthorityError,
    authorities_valid,
    authority_create,
    authority_retire,
    authority_rotate,
    authority_signing,
    sandbox_trust_path,
    trust_owner,
    trusted_lines,
)
from clusters.certificates.signing import (
    CLOCK_SKEW,
    load_private_text,
    new_private_key,
    public_line,
    terms_for,
    user_certificate,
)
from clusters.certificates.trust_file import trusted_keys_write
from clusters.models import Authentication, Cluster, ClusterAccount
from clusters.sandbox.config import Paths, render_sshd_config
from clusters.selectors import account_endpoint
from clusters.ssh import Connection, Endpoint, SSHError, pool
from tests import factories

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _openssh(key: object) -> str:
    assert isinstance(key, Ed25519PublicKey)
    return key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


def _certificate(line: str) -> SSHCertificate:
    identity = load_ssh_public_identity(line.encode())
    assert isinstance(identity, SSHCertificate)
    return identity


def test_the_certificate_allows_one_principal_for_minutes_and_nothing_more() -> None:
    ca, key = new_private_key(), new_private_key()
    terms = terms_for(
        principal="alice",
        key_id="portal:alps:alice:account-7",
        now=NOW,
        lifetime=timedelta(minutes=5),
        source_addresses=("192.0.2.10", "2001:db8::/64"),
    )
    certificate = user_certificate(ca=ca, key=key, terms=terms)

    certificate.verify_cert_signature()  # signed by the CA ...
    assert _openssh(certificate.signature_key()) == _openssh(ca.public_key())
    assert certificate.type == SSHCertificateType.USER
    assert certificate.valid_principals == [b"alice"]  # ... for alice only
    assert certificate.key_id == b"portal:alps:alice:account-7"
    assert certificate.valid_after == int((NOW - CLOCK_SKEW).timestamp())
    assert certificate.valid_before == int((NOW + timedelta(minutes=5)).timestamp())
    # No pty, no agent, port or X11 forwarding, no ~/.ssh/rc: no extension at all.
    assert certificate.extensions == {}
    assert certificate.critical_options == {b"source-address": b"192.0.2.10,2001:db8::/64"}
    assert _openssh(certificate.public_key()) == _openssh(key.public_key())


def test_without_portal_addresses_the_certificate_names_no_source() -> None:
    terms = terms_for(principal="bob", key_id="k", now=NOW, lifetime=timedelta(minutes=2))
    certificate = user_certificate(ca=new_private_key(), key=new_private_key(), terms=terms)
    assert certificate.critical_options == {}
    assert (
        certificate.serial
        != user_certificate(ca=new_private_key(), key=new_private_key(), terms=terms).serial
    )  # a random serial each, for sshd's log


# The CAs.


def test_one_ca_then_a_rotation_of_two_and_the_older_signs_until_retired(db: None) -> None:
    first = authority_create()
    with pytest.raises(AuthorityError, match="rotate"):
        authority_create()
    with pytest.raises(AuthorityError, match="Only one CA is valid"):
        authority_retire()
    second = authority_rotate()
    with pytest.raises(AuthorityError, match=f"retire {first.pk}"):
        authority_rotate()
    assert list(authorities_valid()) == [first, second]
    assert authority_signing() == first  # every login node trusts it already
    assert [line.split()[-1] for line in trusted_lines()] == [
        f"portal-ca:{trust_owner()}:{first.pk}",
        f"portal-ca:{trust_owner()}:{second.pk}",
    ]
    assert authority_retire() == first
    assert authority_signing() == second
    assert [line.split()[1] for line in trusted_lines()] == [second.public_key.split()[1]]
    with pytest.raises(AuthorityError, match=f"No valid CA has id {first.pk}"):
        authority_retire(authority_id=first.pk)
    # The CA key is encrypted at rest, like an account's.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT private_key FROM clusters_certificateauthority WHERE id = %s", [second.pk]
        )
        stored = str(cursor.fetchone()[0])
    assert stored and "PRIVATE KEY" not in stored
    load_private_text(second.private_key)


def test_ssh_ca_command_creates_rotates_retires_and_prints_the_trusted_lines(
    db: None, settings, tmp_path
) -> None:
    settings.SANDBOX_STATE_DIR = tmp_path  # a local run's sandbox, not the shared one
    trusted = sandbox_trust_path()
    trusted.parent.mkdir(parents=True)
    trusted.write_text("")
    out = StringIO()
    call_command("ssh_ca", "create", stdout=out)
    assert "signs from now on" in out.getvalue()
    call_command("ssh_ca", "rotate", stdout=out)
    printed = StringIO()
    call_command("ssh_ca", "public-keys", stdout=printed)
    assert printed.getvalue().splitlines() == trusted_lines()
    assert len(trusted_lines()) == 2
    with pytest.raises(CommandError, match="Two CAs are valid"):
        call_command("ssh_ca", "rotate", stdout=StringIO())
    retired = StringIO()
    call_command("ssh_ca", "retire", stdout=retired)
    signer = authority_signing()
    assert signer is not None
    assert f"CA {signer.pk} signs now." in retired.getvalue()
    # A local run's sandbox trusts the valid CAs at once.
    assert trusted.read_text().splitlines() == trusted_lines()


def test_public_keys_write_keeps_other_portals_and_the_sites_own_lines(db: None, tmp_path) -> None:
    path = tmp_path / "trusted_user_ca_keys"
    site = public_line(new_private_key(), "site-ca")
    other = public_line(new_private_key(), "portal-ca:other_db:3")
    path.write_text(f"# the site's CAs\n{site}\n{other}\n")
    authority_create()
    call_command(
        "ssh_ca", "public-keys", "--write", str(path), stdout=StringIO(), stderr=StringIO()
    )
    assert path.read_text().splitlines() == ["# the site's CAs", site, other, *trusted_lines()]
    authority_rotate()
    authority_retire()
    call_command(
        "ssh_ca", "public-keys", "--write", str(path), stdout=StringIO(), stderr=StringIO()
    )
    assert path.read_text().splitlines() == ["# the site's CAs", site, other, *trusted_lines()]
    trusted_keys_write(path=path, owner=trust_owner(), lines=[])
    assert path.read_text().splitlines() == ["# the site's CAs", site, other]
    assert path.stat().st_mode & 0o777 == 0o644


# Logins built from accounts.


def _certificate_account(cluster: Cluster, user) -> ClusterAccount:
    return ClusterAccount.objects.create(
        cluster=cluster, user=user, username="mia", authentication=Authentication.CERTIFICATE
    )


def test_a_certificate_account_holds_no_key_and_gets_a_fresh_certificate_per_connection(
    cluster: Cluster, member, settings
) -> None:
    settings.SSH_CERTIFICATE_MINUTES = 3
    settings.SSH_PORTAL_ADDRESSES = ["198.51.100.7"]
    ca = authority_create()
    account = _certificate_account(cluster, member)
    assert account.private_key == ""
    endpoint = account_endpoint(account=account)
    assert endpoint.refusal == "" and endpoint.private_key == "" and endpoint.issuer
    first, second = endpoint.issuer(), endpoint.issuer()
    assert first.private_key != second.private_key  # a new key each time
    certificate = _certificate(first.certificate)
    assert certificate.valid_principals == [b"mia"]
    assert certificate.valid_before - certificate.valid_after == 3 * 60 + 60
    assert certificate.critical_options == {b"source-address": b"198.51.100.7"}
    assert _openssh(certificate.signature_key()) == " ".join(ca.public_key.split()[:2])
    # The pool's key is where and as whom, not the certificate of the moment.
    assert account_endpoint(account=account) == endpoint


def test_a_certificate_account_without_a_ca_says_what_the_admin_runs(
    cluster: Cluster, member
) -> None:
    endpoint = account_endpoint(account=_certificate_account(cluster, member))
    assert "manage.py ssh_ca create" in endpoint.refusal
    with pytest.raises(SSHError, match="ssh_ca create") as caught:
        Connection(endpoint)
    assert caught.value.retryable is False


def test_bad_portal_addresses_name_the_setting(cluster: Cluster, member, settings) -> None:
    settings.SSH_PORTAL_ADDRESSES = ['10.0.0.1" command="sh']
    authority_create()
    with pytest.raises(ImproperlyConfigured, match="SSH_PORTAL_ADDRESSES"):
        account_endpoint(account=_certificate_account(cluster, member))


class _Open:
    """An open connection as the pool holds it (only its closing is looked at)."""

    closed = False

    def close(self) -> None:
        self.closed = True


def test_an_inactive_user_gets_no_connection_and_the_pooled_one_is_closed(
    cluster: Cluster, member
) -> None:
    authority_create()
    account = _certificate_account(cluster, member)
    endpoint = account_endpoint(account=account)
    pooled = _Open()
    pool._connections[endpoint] = pooled  # type: ignore[assignment]
    try:
        member.is_active = False
        member.save(update_fields=["is_active"])
        revoked = account_endpoint(account=account)
        assert revoked.issuer is None
        assert "'mia' is inactive" in revoked.refusal
        with pytest.raises(SSHError, match="inactive") as caught, pool.session(revoked):
            pass
        assert caught.value.retryable is False
        assert pooled.closed
        assert endpoint not in pool._connections
    finally:
        pool._connections.pop(endpoint, None)


def test_a_revoked_users_pooled_connections_are_closed_whatever_their_key(
    cluster: Cluster, member
) -> None:
    account = factories.account(cluster, member)
    by_key, other = account_endpoint(account=account), _Open()
    pooled = _Open()
    pool._connections[by_key] = pooled  # type: ignore[assignment]
    elsewhere = Endpoint("elsewhere", "h", 22, "ssh-ed25519 AAAA", account.username, "K")
    pool._connections[elsewhere] = other  # type: ignore[assignment]
    try:
        member.is_active = False
        member.save(update_fields=["is_active"])
        with pytest.raises(SSHError, match="inactive"):
            pool.get(account_endpoint(account=account))
        assert pooled.closed and by_key not in pool._connections
        assert not other.closed  # the same name on another cluster is another login
    finally:
        pool._connections.pop(by_key, None)
        pool._connections.pop(elsewhere, None)


def test_a_removed_account_gets_no_connection(cluster: Cluster, member) -> None:
    account = factories.account(cluster, member)
    ClusterAccount.objects.filter(pk=account.pk).delete()
    assert "was removed" in account_endpoint(account=account).refusal


def test_a_stored_key_account_is_unchanged_and_the_shared_account_has_no_user_check(
    cluster: Cluster, member
) -> None:
    mine, shared = factories.account(cluster, member), factories.account(cluster, None)
    for account in (mine, shared):
        endpoint = account_endpoint(account=account)
        assert endpoint.private_key == account.private_key
        assert endpoint.issuer is None and endpoint.refusal == ""


def test_an_installed_key_account_without_its_key_says_where_to_make_it(
    cluster: Cluster, member
) -> None:
    account = ClusterAccount.objects.create(
        cluster=cluster, user=member, username="mia", authentication=Authentication.INSTALLED_KEY
    )
    assert "cluster logins page" in account_endpoint(account=account).refusal


def test_endpoints_built_by_hand_still_log_in_with_their_key() -> None:
    endpoint = Endpoint("local", "localhost", 22, "ssh-ed25519 AAAA", "mia", "KEY")
    assert (endpoint.private_key, endpoint.issuer, endpoint.refusal) == ("KEY", None, "")


def test_the_sandbox_sshd_trusts_the_file_the_portal_writes(tmp_path) -> None:
    paths = Paths.of(tmp_path)
    lines = render_sshd_config(paths).splitlines()
    assert f"TrustedUserCAKeys {paths.trusted_user_ca_keys}" in lines
    assert "AuthorizedPrincipalsFile none" in lines  # the principal is the login's name
    second = Paths.second(tmp_path)
    assert (
        f"TrustedUserCAKeys {second.trusted_user_ca_keys}"
        in render_sshd_config(second).splitlines()
    )
