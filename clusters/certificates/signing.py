"""Keys and SSH user certificates, in memory: nothing here touches a disk or a database."""

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
    SSHCertificate,
    SSHCertificateBuilder,
    SSHCertificateType,
    load_ssh_private_key,
)

# A login node's clock a little behind the portal's must still accept a certificate.
CLOCK_SKEW = timedelta(minutes=1)
# No extension: no pty (the portal runs commands and SFTP, never a terminal), no agent,
# port or X11 forwarding, no ~/.ssh/rc.
EXTENSIONS: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class CertificateTerms:
    """What one certificate allows: whom, from where, when."""

    principal: str
    key_id: str
    valid_after: datetime
    valid_before: datetime
    source_addresses: tuple[str, ...] = ()  # empty: any client address


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_text(key: Ed25519PrivateKey) -> str:
    """The key as an unencrypted OpenSSH private key file's text."""
    return key.private_bytes(Encoding.PEM, PrivateFormat.OpenSSH, NoEncryption()).decode()


def public_line(key: Ed25519PrivateKey, comment: str = "") -> str:
    """`ssh-ed25519 AAAA... comment`, as an authorized_keys or TrustedUserCAKeys line."""
    line = key.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


def load_private_text(text: str) -> Ed25519PrivateKey:
    key = load_ssh_private_key(text.encode(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError("the CA key is not an ed25519 key")
    return key


def terms_for(
    *,
    principal: str,
    key_id: str,
    now: datetime,
    lifetime: timedelta,
    source_addresses: tuple[str, ...] = (),
) -> CertificateTerms:
    """A certificate's terms from `now` for `lifetime`, the clock skew allowed before it."""
    return CertificateTerms(
        principal=principal,
        key_id=key_id,
        valid_after=now - CLOCK_SKEW,
        valid_before=now + lifetime,
        source_addresses=source_addresses,
    )


def user_certificate(
    *, ca: Ed25519PrivateKey, key: Ed25519PrivateKey, terms: CertificateTerms
) -> SSHCertificate:
    """A user certificate for `key`, signed by `ca`: one principal, no extension."""
    builder = (
        SSHCertificateBuilder()
        .public_key(key.public_key())
        .serial(secrets.randbits(64))
        .type(SSHCertificateType.USER)
        .key_id(terms.key_id.encode())
        .valid_principals([terms.principal.encode()])
        .valid_after(int(terms.valid_after.timestamp()))
        .valid_before(int(terms.valid_before.timestamp()))
    )
    if terms.source_addresses:
        builder = builder.add_critical_option(
            b"source-address", ",".join(terms.source_addresses).encode()
        )
    for extension in EXTENSIONS:
        builder = builder.add_extension(extension, b"")
    return builder.sign(ca)


def certificate_line(certificate: SSHCertificate) -> str:
    return certificate.public_bytes().decode()
