"""OpenSSH public host key lines: parsing and fingerprints, without paramiko."""

import base64
import binascii
import hashlib
import re

from django.core.exceptions import ValidationError

KEY_TYPES = (
    "ssh-ed25519",
    "ecdsa-sha2-nistp256",
    "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521",
    "rsa-sha2-512",
    "rsa-sha2-256",
    "ssh-rsa",
)
_LINE = re.compile(r"^\s*(?:\S+\s+)?(?P<type>[a-z0-9-]+)\s+(?P<blob>[A-Za-z0-9+/=]+)(?:\s.*)?$")


def parse_host_key(line: str) -> tuple[str, bytes]:
    """The (key type, key blob) of `type base64 [comment]`, or of a known_hosts line."""
    match = _LINE.match(line.strip())
    if not match or match["type"] not in KEY_TYPES:
        raise ValidationError(
            "Paste the server's public host key as one line, e.g. the output of "
            "`ssh-keyscan -p PORT HOST` or the content of /etc/ssh/ssh_host_ed25519_key.pub "
            f"(expected one of: {', '.join(KEY_TYPES)})."
        )
    try:
        blob = base64.b64decode(match["blob"], validate=True)
    except binascii.Error as exc:
        raise ValidationError("The host key's base64 part is damaged; paste it again.") from exc
    return match["type"], blob


def fingerprint(key_type: str, blob: bytes) -> str:
    """OpenSSH's SHA256 fingerprint, as `ssh-keygen -lf` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    return f"{key_type} SHA256:{digest}"


def validate_host_key(value: str) -> None:
    parse_host_key(value)
