"""The portal's SSH certificate authorities: create, rotate, retire, and the keys to trust.

At most two are valid at once. During a rotation both are trusted and the older one
signs (every login node trusts it already); retiring the older one moves signing to
the newer. A retired CA signs nothing and leaves the trusted keys' lines.
"""

from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from clusters.certificates.signing import new_private_key, private_text, public_line
from clusters.certificates.trust_file import trusted_keys_write
from clusters.errors import ClusterError
from clusters.models import CertificateAuthority
from clusters.sandbox.config import Paths

MAX_VALID = 2


class AuthorityError(ClusterError):
    """A CA operation refused, with what to do instead."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


def authorities_valid() -> QuerySet[CertificateAuthority]:
    """The CAs not retired, oldest first."""
    return CertificateAuthority.objects.filter(retired_at__isnull=True).order_by("created_at", "id")


def authority_signing() -> CertificateAuthority | None:
    """The CA that signs now: the oldest valid one."""
    return authorities_valid().first()


def trust_owner() -> str:
    """This portal's name in a shared TrustedUserCAKeys file: its database's name."""
    return str(settings.DATABASES["default"]["NAME"]).rsplit("/", 1)[-1]


def trusted_lines() -> list[str]:
    """One TrustedUserCAKeys line per valid CA, each tagged with this portal and the CA."""
    owner = trust_owner()
    return [
        f"{' '.join(ca.public_key.split()[:2])} portal-ca:{owner}:{ca.pk}"
        for ca in authorities_valid()
    ]


def _new_authority() -> CertificateAuthority:
    key = new_private_key()
    return CertificateAuthority.objects.create(
        private_key=private_text(key), public_key=public_line(key)
    )


@transaction.atomic
def authority_create() -> CertificateAuthority:
    """The portal's first CA; refused while one is valid (rotate it instead)."""
    if _locked_valid():
        raise AuthorityError(
            "The portal already has a valid CA: use `ssh_ca rotate` to add a second one."
        )
    return _new_authority()


@transaction.atomic
def authority_rotate() -> CertificateAuthority:
    """A second CA beside the valid one; the older keeps signing until it is retired."""
    valid = _locked_valid()
    if not valid:
        raise AuthorityError("The portal has no valid CA yet: use `ssh_ca create`.")
    if len(valid) >= MAX_VALID:
        raise AuthorityError(
            f"Two CAs are valid already (ids {valid[0].pk} and {valid[1].pk}): retire the "
            f"older one (`ssh_ca retire {valid[0].pk}`) once every login node trusts the "
            "newer one, then rotate again."
        )
    return _new_authority()


@transaction.atomic
def authority_retire(*, authority_id: int | None = None) -> CertificateAuthority:
    """Retire a CA (by default the older of two during a rotation); it signs nothing more."""
    valid = _locked_valid()
    if authority_id is None:
        if len(valid) < MAX_VALID:
            raise AuthorityError(
                "Only one CA is valid: retiring it stops every certificate login. Name its "
                "id to do so anyway (`ssh_ca retire ID`), or rotate first."
            )
        authority = valid[0]
    else:
        found = [ca for ca in valid if ca.pk == authority_id]
        if not found:
            raise AuthorityError(
                f"No valid CA has id {authority_id}; valid ones: "
                f"{', '.join(str(ca.pk) for ca in valid) or 'none'}."
            )
        authority = found[0]
    authority.retired_at = timezone.now()
    authority.save(update_fields=["retired_at"])
    return authority


def _locked_valid() -> list[CertificateAuthority]:
    return list(authorities_valid().select_for_update())


def authorities_publish(*, path: Path) -> list[str]:
    """Write this portal's valid CAs into the TrustedUserCAKeys file at `path` (other
    portals' lines kept); the lines written."""
    lines = trusted_lines()
    trusted_keys_write(path=path, owner=trust_owner(), lines=lines)
    return lines


def sandbox_trust_path(*, second: bool = False) -> Path:
    """The TrustedUserCAKeys file of the sandbox's login node (or the second cluster's)."""
    state_dir = settings.SANDBOX_STATE_DIR
    paths = Paths.second(state_dir) if second else Paths.of(state_dir)
    return paths.trusted_user_ca_keys
