"""The admin's Clusters -> Add, in two steps: where the login node is (the portal fetches
its host key), then that key's fingerprint confirmed (clusters.admin runs the steps)."""

from typing import Any

from django import forms

from clusters.models import ABSOLUTE_PATH, POSIX_USER_NAME
from clusters.onboarding.services import NewCluster, cluster_name_for


class WriteOnlyTextarea(forms.Textarea):
    """Never renders its value, not even the one just typed into a form with errors."""

    def format_value(self, value: Any) -> None:
        return None


class ClusterHostForm(forms.Form):
    """Clusters -> Add, first step: where the login node is, and the portal's login there."""

    ssh_host = forms.CharField(label="SSH host", max_length=255)
    ssh_port = forms.IntegerField(label="SSH port", initial=22, min_value=1, max_value=65535)
    name = forms.SlugField(
        required=False, max_length=64, help_text="Default: the host name's first part."
    )
    portal_username = forms.CharField(
        label="Portal (operator) account",
        required=False,
        max_length=32,
        validators=[POSIX_USER_NAME],
        help_text="A login only the portal uses (no job runs as it), e.g. portal-svc.",
    )
    base_run_dir = forms.CharField(
        required=False,
        max_length=255,
        help_text="Where run directories go, on a filesystem every node mounts. Default: "
        "~/portal-runs.",
    )
    trusts_portal_ca = forms.BooleanField(
        label="Its login nodes trust the portal's CA",
        required=False,
        help_text="sshd's TrustedUserCAKeys holds the lines of `manage.py ssh_ca "
        "public-keys`: the portal account logs in by certificate and needs no key.",
    )

    def clean_ssh_host(self) -> str:
        host: str = self.cleaned_data["ssh_host"].strip()
        if not host or host.startswith("-") or any(c.isspace() for c in host):
            raise forms.ValidationError("Give the login node's host name or address alone.")
        return host

    def clean_base_run_dir(self) -> str:
        path: str = self.cleaned_data["base_run_dir"].strip()
        if path and not path.startswith("~"):
            ABSOLUTE_PATH(path)
        return path


class ClusterConfirmForm(forms.Form):
    """Clusters -> Add, second step: the host key confirmed, and the operator's key if any."""

    fingerprint = forms.CharField(
        label="Fingerprint the site gave you",
        required=False,
        help_text="SHA256:..., as `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` prints "
        "it on the login node; it must be the one shown above.",
    )
    compared = forms.BooleanField(
        label="I compared the fingerprint above with the one the site gave me",
        required=False,
    )
    new_portal_private_key = forms.CharField(
        label="Portal account's private key",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Unencrypted OpenSSH private key; stored encrypted, never shown again. "
        "Leave blank where the cluster trusts the portal's CA.",
    )

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        if not data.get("fingerprint", "").strip() and not data.get("compared"):
            raise forms.ValidationError(
                "Confirm the host key: give the fingerprint the site gave you, or tick that "
                "you compared it. Nothing is recorded until then."
            )
        return data


def pending_new(pending: dict[str, Any], key: str) -> NewCluster:
    """The first step's answers (kept in the session with the fetched host key) and the key."""
    return NewCluster(
        host=pending["ssh_host"],
        port=pending["ssh_port"],
        host_key=pending["host_key"],
        name=pending["name"] or cluster_name_for(pending["ssh_host"]),
        base_run_dir=pending["base_run_dir"],
        operator_user=pending["portal_username"],
        operator_key=key,
        trusts_portal_ca=pending["trusts_portal_ca"],
    )
