"""The login node: a fresh connection (the pinned host key really checked), and what its
login environment says about Slurm and Python."""

import shlex
from dataclasses import dataclass

from clusters.models import Cluster
from clusters.onboarding.checks import Check, failed, passed
from clusters.slurm.tools import CLEAN_PATH
from clusters.ssh import Connection, HostKeyMismatch, SSHError

LOGIN = "Login node"
TIMEOUT = 15.0
_PYTHON_VERSION = "import sys; print('%d.%d.%d' % sys.version_info[:3], sys.executable)"


@dataclass(frozen=True)
class LoginEnvironment:
    """Where a login shell finds Slurm: what `cluster add` records when not told."""

    slurm_conf: str  # $SLURM_CONF, "" when unset
    slurm_bin_dir: str  # the directory of `command -v sbatch`, "" when not found


def login_check(cluster: Cluster, connection: Connection) -> Check:
    return passed(
        LOGIN,
        f"{cluster.ssh_host} port {cluster.ssh_port} presented the pinned host key "
        f"{cluster.host_key_fingerprint}; logged in as {connection.endpoint.username}",
    )


def login_failed(cluster: Cluster, exc: SSHError) -> Check:
    if isinstance(exc, HostKeyMismatch):
        fix = "Confirm the new key with the site, then record it: cluster add again, or the admin."
    else:
        fix = (
            "Check the host and port, that this machine may reach them, and that the login "
            "node accepts the account's login: its public key in ~/.ssh/authorized_keys, or, "
            "by certificate, the lines of `manage.py ssh_ca public-keys` in sshd's "
            "TrustedUserCAKeys file."
        )
    return failed(LOGIN, str(exc), fix)


def no_account(cluster: Cluster) -> Check:
    return failed(
        LOGIN,
        f"cluster {cluster.name} has no account to log in as",
        "Give the portal's operator account: `cluster add --operator-user NAME` with "
        "`--operator-key FILE` (or `--trusts-ca` where the login nodes trust the portal's "
        "CA), or the portal account under the cluster in the admin.",
    )


def login_python(connection: Connection) -> str:
    """python3's version and path as the portal agent finds it (clean PATH, isolated)."""
    argv = ["/usr/bin/env", "-i", f"PATH={CLEAN_PATH}", "python3", "-I", "-c", _PYTHON_VERSION]
    result = connection.run(shlex.join(argv), timeout=TIMEOUT)
    lines = result.text.strip().splitlines()
    return lines[0] if result.exit_status == 0 and lines else ""


def login_environment(connection: Connection) -> LoginEnvironment:
    """$SLURM_CONF and sbatch's directory in the account's login environment."""
    result = connection.run(
        'printf "%s\\n" "${SLURM_CONF:-}"; command -v sbatch || true', timeout=TIMEOUT
    )
    lines = [*result.text.splitlines(), "", ""]
    sbatch = lines[1].strip()
    bin_dir = sbatch.rsplit("/", 1)[0] if sbatch.startswith("/") else ""
    return LoginEnvironment(slurm_conf=lines[0].strip(), slurm_bin_dir=bin_dir)
