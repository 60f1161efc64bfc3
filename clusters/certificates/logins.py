"""How the gateway logs in as a cluster account, decided afresh at each use.

Each use builds the account's endpoint here, after a check that the account still
exists and that its portal user is active: a revoked user's endpoint carries the
refusal, so no certificate is signed and no connection, new or pooled, is handed out.
The portal's own operator login is decided here too (a certificate where the cluster
trusts the portal's CA, else the admin's stored key).
"""

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from clusters.certificates.authorities import authority_signing
from clusters.certificates.signing import (
    certificate_line,
    load_private_text,
    new_private_key,
    private_text,
    terms_for,
    user_certificate,
)
from clusters.models import Authentication, CertificateAuthority, Cluster, ClusterAccount
from clusters.ssh import Endpoint, LoginKey

# What sshd's from= and source-address take: addresses, CIDR blocks, wildcards, negation.
_ADDRESS = re.compile(r"^!?[0-9A-Za-z.:/*?%-]+$")


def portal_addresses() -> tuple[str, ...]:
    """SSH_PORTAL_ADDRESSES: where the portal's connections come from, as login nodes see it."""
    addresses = tuple(settings.SSH_PORTAL_ADDRESSES)
    for address in addresses:
        if not _ADDRESS.match(address):
            raise ImproperlyConfigured(
                f"SSH_PORTAL_ADDRESSES holds {address!r}: give IP addresses or CIDR blocks "
                "(e.g. 192.0.2.10,2001:db8::/64), as sshd's from= option takes them."
            )
    return addresses


def certificate_lifetime() -> timedelta:
    return timedelta(minutes=settings.SSH_CERTIFICATE_MINUTES)


@dataclass(frozen=True)
class CertificateIssuer:
    """Signs, at each new connection, a fresh key's certificate for one account."""

    ca_private_key: str = field(repr=False)
    principal: str
    key_id: str
    lifetime: timedelta
    source_addresses: tuple[str, ...]

    def __call__(self) -> LoginKey:
        key = new_private_key()
        terms = terms_for(
            principal=self.principal,
            key_id=self.key_id,
            now=timezone.now(),
            lifetime=self.lifetime,
            source_addresses=self.source_addresses,
        )
        certificate = user_certificate(
            ca=load_private_text(self.ca_private_key), key=key, terms=terms
        )
        return LoginKey(private_key=private_text(key), certificate=certificate_line(certificate))


@dataclass
class LoginChecks:
    """What the logins of some accounts are decided on, read now: one query for whether
    each account and its user are still there and active, and the signing CA once (a
    poll builds all its accounts' endpoints on one of these)."""

    refusals: dict[int, str]
    _ca: CertificateAuthority | None = None
    _ca_read: bool = False

    def signing_ca(self) -> CertificateAuthority | None:
        if not self._ca_read:
            self._ca, self._ca_read = authority_signing(), True
        return self._ca


def login_checks(*, accounts: Sequence[ClusterAccount]) -> LoginChecks:
    """The checks of `accounts`' logins, read now (one query; the CA when first needed)."""
    rows = {
        row["pk"]: row
        for row in ClusterAccount.objects.filter(pk__in=[a.pk for a in accounts]).values(
            "pk", "user_id", "user__is_active", "user__username"
        )
    }
    return LoginChecks({a.pk: _refusal(a, rows.get(a.pk)) for a in accounts})


def _refusal(account: ClusterAccount, row: Mapping[str, Any] | None) -> str:
    """Why the portal must not connect as the account any more; empty when it may."""
    where = f"{account.username!r} on cluster {account.cluster.name!r}"
    if row is None:
        return f"The cluster account {where} was removed: the portal no longer connects as it."
    if row["user_id"] is not None and not row["user__is_active"]:
        return (
            f"The portal user {row['user__username']!r} is inactive: the portal signs no "
            f"certificate and opens no connection as {where}. An admin re-activates the "
            "user to allow it again."
        )
    return ""


def account_login(*, account: ClusterAccount, endpoint: Endpoint, checks: LoginChecks) -> Endpoint:
    """`endpoint` (where, as whom) with the account's way in, or the reason there is none."""
    refusal = checks.refusals[account.pk]
    if refusal:
        return replace(endpoint, refusal=refusal)
    name = account.username
    if account.authentication == Authentication.CERTIFICATE:
        return _certificate_login(account, endpoint, checks.signing_ca())
    if account.authentication == Authentication.INSTALLED_KEY:
        if not account.private_key:
            return replace(
                endpoint,
                refusal=f"The cluster account {name!r} has no key yet: its user makes one on "
                "the portal's cluster logins page and adds its line to ~/.ssh/authorized_keys.",
            )
        return replace(
            endpoint,
            private_key=account.private_key,
            refused_help=f"the key the portal made is not in {name}'s ~/.ssh/authorized_keys "
            "there (or its from= address is not the portal's): paste the line shown on the "
            "portal's cluster logins page, on one line, and test it there.",
        )
    if not account.private_key:
        return replace(
            endpoint,
            refusal=f"The cluster account {name!r} has no stored private key: an admin pastes "
            "one, or switches the account to a certificate.",
        )
    return replace(endpoint, private_key=account.private_key)


def operator_login(*, cluster: Cluster, endpoint: Endpoint) -> Endpoint:
    """`endpoint` with the portal's own login (the operator account, no job runs as it).

    Where the cluster trusts the portal's CA and a CA signs, a certificate for the
    operator's name, signed at each new connection; else the key an admin stored.
    """
    name = cluster.portal_username
    ca = authority_signing() if cluster.trusts_portal_ca else None
    if ca is not None:
        return _signed_login(
            ca, endpoint, principal=name, key_id=f"portal:{cluster.name}:{name}:operator"
        )
    if cluster.portal_private_key:
        return replace(endpoint, private_key=cluster.portal_private_key)
    if cluster.trusts_portal_ca:
        return replace(
            endpoint,
            refusal=f"No certificate for the portal account {name!r} on {cluster.name!r}: "
            "the portal has no CA. An admin runs `manage.py ssh_ca create` and adds `ssh_ca "
            "public-keys` to the login nodes' TrustedUserCAKeys file, or pastes the "
            "account's key on the cluster's admin page.",
        )
    return replace(
        endpoint,
        refusal=f"The portal account {name!r} on {cluster.name!r} has no key and the "
        "cluster does not trust the portal's CA: an admin pastes its key, or ticks "
        "'trusts the portal's CA' once its login nodes do.",
    )


def _certificate_login(
    account: ClusterAccount, endpoint: Endpoint, ca: CertificateAuthority | None
) -> Endpoint:
    name = account.username
    if ca is None:
        return replace(
            endpoint,
            refusal=f"No certificate for {name!r}: the portal has no CA. An admin runs "
            "`manage.py ssh_ca create` and adds `ssh_ca public-keys` to the login nodes' "
            "TrustedUserCAKeys file.",
        )
    key_id = f"portal:{account.cluster.name}:{name}:account-{account.pk}"
    return _signed_login(ca, endpoint, principal=name, key_id=key_id)


def _signed_login(
    ca: CertificateAuthority, endpoint: Endpoint, *, principal: str, key_id: str
) -> Endpoint:
    """`endpoint` logging in by a certificate for `principal`, signed by `ca` per connection."""
    issuer = CertificateIssuer(
        ca_private_key=ca.private_key,
        principal=principal,
        key_id=key_id,
        lifetime=certificate_lifetime(),
        source_addresses=portal_addresses(),
    )
    return replace(
        endpoint,
        issuer=issuer,
        refused_help=f"the login node does not accept the portal's certificate for "
        f"{principal}: its sshd_config needs TrustedUserCAKeys with the lines of `manage.py "
        f"ssh_ca public-keys` (CA {ca.pk} signs now), {principal} must be the user's name "
        "there, and SSH_PORTAL_ADDRESSES the portal's address as the node sees it.",
    )
