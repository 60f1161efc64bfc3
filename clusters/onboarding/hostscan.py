"""Fetching a login node's host key to show and confirm before the cluster is recorded.

`ssh-keyscan` (OpenSSH's own client tool) asks the server for its keys without
logging in; the admin confirms the SHA256 fingerprint they got from the site by
another channel, and every later connection pins that key (clusters.ssh).
"""

import re
import shutil
import subprocess

from django.core.exceptions import ValidationError

from clusters.hostkeys import fingerprint, parse_host_key
from portal_lib.errors import PortalError

SCAN_TIMEOUT = 10  # seconds ssh-keyscan waits for the server
# The key the portal pins, in order of preference (paramiko's too).
PREFERRED_TYPES = ("ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ssh-rsa")
_FINGERPRINT = re.compile(r"^(?:\S+\s+)?SHA256:([A-Za-z0-9+/]{43})=?$")


class HostKeyError(PortalError):
    """No host key to confirm, or not the one the admin expected; the message says why."""


def host_key_scan(host: str, port: int) -> str:
    """The login node's preferred public host key, as one `type base64` line."""
    keyscan = shutil.which("ssh-keyscan")
    if keyscan is None:
        raise HostKeyError(
            "ssh-keyscan is not installed on the portal's machine: install OpenSSH's client "
            "(Debian: openssh-client)."
        )
    types = ",".join(("ed25519", "ecdsa", "rsa"))
    proc = subprocess.run(  # noqa: S603 - a fixed argv; host and port are separate arguments
        [keyscan, "-T", str(SCAN_TIMEOUT), "-p", str(port), "-t", types, "--", host],
        capture_output=True,
        text=True,
        timeout=SCAN_TIMEOUT * 3 + 5,
        check=False,
    )
    keys: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        try:
            key_type, _blob = parse_host_key(line)
        except ValidationError:
            continue
        keys[key_type] = " ".join(line.split()[1:3])
    for key_type in PREFERRED_TYPES:
        if key_type in keys:
            return keys[key_type]
    said = " ".join(line for line in proc.stderr.splitlines() if not line.startswith("#"))
    raise HostKeyError(
        f"No SSH host key came back from {host} port {port}"
        + (f" ({said.strip()[:300]})" if said.strip() else "")
        + ": check the host name and port, and that sshd runs there and this machine may reach it."
    )


def host_key_fingerprint(host_key: str) -> str:
    """`ssh-ed25519 SHA256:...`, as `ssh-keygen -lf` prints it."""
    return fingerprint(*parse_host_key(host_key))


def host_key_confirm(host_key: str, expected: str) -> None:
    """Refuse unless `expected` (`SHA256:...`, as ssh-keygen -lf prints it) is this key's."""
    match = _FINGERPRINT.match(expected.strip())
    if match is None:
        raise HostKeyError(
            f"{expected!r} is not a SHA256 fingerprint: give it as `ssh-keygen -lf` prints it, "
            "e.g. SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s."
        )
    actual = host_key_fingerprint(host_key)
    if actual.split("SHA256:", 1)[1] != match[1]:
        raise HostKeyError(
            f"The login node presented {actual}, not the expected SHA256:{match[1]}. Nothing was "
            "recorded. Ask the site for the key's fingerprint again (`ssh-keygen -lf "
            "/etc/ssh/ssh_host_ed25519_key.pub` on the login node); if it really is the one "
            "shown here, give that one. Otherwise something between you and the cluster "
            "answers in its name: do not add it."
        )
