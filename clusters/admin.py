from typing import Any

from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from clusters.models import Cluster, ClusterAccount
from clusters.slurm.health import cluster_connection_check


class WriteOnlyTextarea(forms.Textarea):
    """Never renders its value, not even the one just typed into a form with errors."""

    def format_value(self, value: Any) -> None:
        return None


def _checked_private_key(text: str) -> str:
    key = text.strip()
    try:
        load_ssh_private_key(key.encode() + b"\n", password=None)
    except (ValueError, TypeError) as exc:
        raise forms.ValidationError(
            "This is not an unencrypted OpenSSH private key (it should begin with "
            "'-----BEGIN OPENSSH PRIVATE KEY-----' and have no passphrase)."
        ) from exc
    return key + "\n"


class ClusterForm(forms.ModelForm):
    """The portal account's key can be replaced but is never sent back to the browser."""

    new_portal_private_key = forms.CharField(
        label="Portal account's private key",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Unencrypted OpenSSH private key of the portal account; stored encrypted, "
        "never shown again; leave blank to keep the current one.",
    )

    class Meta:
        model = Cluster
        fields = [
            "name",
            "ssh_host",
            "ssh_port",
            "host_key",
            "portal_username",
            "slurm_bin_dir",
            "slurm_conf",
            "base_run_dir",
            "default_partition",
            "gpu_model",
            "gpu_peak_bf16_tflops",
            "price_per_gpu_hour",
            "price_per_cpu_hour",
            "is_active",
            "accounting_enabled",
            "mirror_quotas",
        ]
        widgets = {"host_key": forms.TextInput(attrs={"size": 100, "spellcheck": "false"})}

    def clean_new_portal_private_key(self) -> str:
        text: str = self.cleaned_data["new_portal_private_key"]
        return _checked_private_key(text) if text.strip() else ""

    def save(self, commit: bool = True) -> Cluster:
        cluster: Cluster = super().save(commit=False)
        if self.cleaned_data.get("new_portal_private_key"):
            cluster.portal_private_key = self.cleaned_data["new_portal_private_key"]
        if commit:
            cluster.save()
        return cluster


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    form = ClusterForm
    list_display = [
        "name",
        "ssh_host",
        "ssh_port",
        "gpu_model",
        "gpu_peak_bf16_tflops",
        "price_per_gpu_hour",
        "is_active",
        "accounting_enabled",
        "mirror_quotas",
        "trusted_reads",
    ]
    list_filter = ["is_active", "gpu_model", "accounting_enabled", "mirror_quotas"]
    search_fields = ["name", "ssh_host"]
    readonly_fields = ["host_key_fingerprint", "trust", "created_at"]
    actions = ["test_connection"]

    @admin.display(description="portal account", boolean=True)
    def trusted_reads(self, cluster: Cluster) -> bool:
        return cluster.has_portal_account

    @admin.display(description="state and billing read as")
    def trust(self, cluster: Cluster) -> str:
        if cluster.has_portal_account:
            return f"the portal account {cluster.portal_username} (no job runs as it)"
        return f"Warning: {cluster.trust_warning}"

    @admin.action(description="Test connection (host key and sinfo)")
    def test_connection(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        for cluster in queryset:
            check = cluster_connection_check(cluster=cluster)
            level = messages.SUCCESS if check.ok else messages.ERROR
            self.message_user(request, f"{check.cluster}: {check.message}", level)


class ClusterAccountForm(forms.ModelForm):
    """The private key can be replaced but is never sent back to the browser."""

    new_private_key = forms.CharField(
        label="Private key",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Paste an unencrypted OpenSSH private key. It is stored encrypted and never "
        "shown again; leave blank to keep the current key.",
    )

    class Meta:
        model = ClusterAccount
        fields = ["cluster", "user", "username"]

    def clean_new_private_key(self) -> str:
        key: str = self.cleaned_data["new_private_key"].strip()
        if not key:
            if self.instance.pk is None:
                raise forms.ValidationError("A new account needs its private key.")
            return ""
        return _checked_private_key(key)

    def save(self, commit: bool = True) -> ClusterAccount:
        account: ClusterAccount = super().save(commit=False)
        if self.cleaned_data.get("new_private_key"):
            account.private_key = self.cleaned_data["new_private_key"]
        if commit:
            account.save()
        return account


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    form = ClusterAccountForm
    list_display = ["username", "cluster", "user", "kind", "updated_at"]
    list_filter = ["cluster"]
    search_fields = ["username", "user__username", "cluster__name"]
    list_select_related = ["cluster", "user"]
    autocomplete_fields = ["user"]
    fields = ["cluster", "user", "username", "new_private_key", "key_status"]
    readonly_fields = ["key_status"]

    @admin.display(description="kind")
    def kind(self, account: ClusterAccount) -> str:
        return "shared service account" if account.is_service_account else "personal"

    @admin.display(description="key on file")
    def key_status(self, account: ClusterAccount) -> str:
        return "stored (encrypted)" if account.pk and account.private_key else "not set"
