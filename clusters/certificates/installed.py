"""The self-service key: the portal makes a key for the user's account and shows only the
`authorized_keys` line the user pastes on the cluster; the private half stays encrypted
in the account row and is never shown."""

import shlex
from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from clusters.certificates.logins import portal_addresses
from clusters.certificates.signing import load_private_text, new_private_key, private_text
from clusters.certificates.signing import public_line as key_line
from clusters.errors import ClusterError
from clusters.models import Authentication, ClusterAccount
from clusters.selectors import account_endpoint
from clusters.ssh import Connection, HostKeyMismatch, SSHError

TEST_TIMEOUT = 15.0


class InstalledKeyError(ClusterError):
    """The account does not log in with a key its user installs."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


@dataclass(frozen=True)
class KeyTest:
    ok: bool
    message: str  # plain words: what happened and what to fix


def logins_of(*, user_id: int) -> QuerySet[ClusterAccount]:
    """The user's own accounts on clusters, by cluster name."""
    return (
        ClusterAccount.objects.filter(user_id=user_id)
        .select_related("cluster")
        .order_by("cluster__name")
    )


@transaction.atomic
def installed_key_make(*, account: ClusterAccount) -> ClusterAccount:
    """A new key for the account (the line pasted before stops working)."""
    if account.authentication != Authentication.INSTALLED_KEY:
        raise InstalledKeyError(
            f"Your login {account.username} on {account.cluster.name} does not use a key you "
            "install: ask an administrator to switch it if your site needs one."
        )
    account.private_key = private_text(new_private_key())
    account.key_made_at = timezone.now()
    account.save(update_fields=["private_key", "key_made_at", "updated_at"])
    return account


def authorized_keys_line(*, account: ClusterAccount) -> str:
    """The one line for ~/.ssh/authorized_keys: only from the portal's addresses, and
    `restrict` (no pty, no forwarding of agent, ports or X11, no ~/.ssh/rc)."""
    if not account.private_key or account.authentication != Authentication.INSTALLED_KEY:
        return ""
    options = "restrict"
    addresses = portal_addresses()
    if addresses:
        options += f',from="{",".join(addresses)}"'
    comment = f"portal@{account.cluster.name}:{account.username}"
    return f"{options} {key_line(load_private_text(account.private_key), comment)}"


def install_command(*, line: str) -> str:
    """A shell command that appends the line, for users who prefer to paste one command."""
    return (
        "mkdir -p ~/.ssh && chmod 700 ~/.ssh && "
        f"echo {shlex.quote(line)} >> ~/.ssh/authorized_keys && chmod 600 ~/.ssh/authorized_keys"
    )


def login_test(*, account: ClusterAccount) -> KeyTest:
    """Log in as the account now, its way (certificate or key), and say in plain words how
    it went and what to fix."""
    name, cluster = account.username, account.cluster
    endpoint = account_endpoint(account=account)
    if endpoint.refusal:
        if account.authentication == Authentication.INSTALLED_KEY and not account.private_key:
            return KeyTest(False, "There is no key yet: make one first, then paste its line.")
        return KeyTest(False, f"The portal does not log in as {name} now: {endpoint.refusal}")
    try:
        with Connection(endpoint, connect_timeout=TEST_TIMEOUT) as ssh:
            answer = ssh.run("id -un", timeout=TEST_TIMEOUT)
    except HostKeyMismatch:
        return KeyTest(
            False,
            f"{cluster.name} answered with a host key the portal does not know, so the portal "
            "did not log in. Tell an administrator: it may be a changed server or an attack.",
        )
    except SSHError as exc:
        if exc.retryable:
            return KeyTest(
                False,
                f"The portal cannot reach {cluster.name} ({cluster.ssh_host}) now. Nothing is "
                "wrong with your login as far as the portal knows: try again in a few minutes.",
            )
        return KeyTest(False, _refused_words(account))
    if answer.exit_status != 0 or answer.text.strip() != name:
        return KeyTest(
            False,
            f"The portal logged in to {cluster.name}, but `id -un` answered "
            f"{answer.text.strip()!r} instead of {name!r}: tell an administrator.",
        )
    return KeyTest(True, f"It works: the portal logged in to {cluster.name} as {name}.")


def _refused_words(account: ClusterAccount) -> str:
    name, cluster = account.username, account.cluster.name
    if account.authentication == Authentication.CERTIFICATE:
        return (
            f"{cluster} refused the portal's certificate for {name}. Its login nodes must "
            "trust the portal's CA (sshd's TrustedUserCAKeys holds the lines of `manage.py "
            f"ssh_ca public-keys`), and {name} must be your user name there: tell an "
            "administrator."
        )
    if account.authentication == Authentication.STORED_KEY:
        return f"{cluster} refused the key an administrator stored for {name}: tell them."
    return (
        f"{cluster} refused the key for {name}. Check, logged in there as {name}: the line is "
        "in ~/.ssh/authorized_keys exactly as shown, on one line (no line breaks added by the "
        "copy); ~/.ssh is mode 700 and authorized_keys mode 600, owned by you; and the line "
        "is the newest one (making a key again replaces it)."
    )
