from typing import Any

from cryptography.hazmat.primitives.serialization import load_ssh_private_key
from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse

from clusters.models import Authentication, CertificateAuthority, Cluster, ClusterAccount
from clusters.onboarding.forms import (
    ClusterConfirmForm,
    ClusterHostForm,
    WriteOnlyTextarea,
    pending_new,
)
from clusters.onboarding.hostscan import (
    HostKeyError,
    host_key_confirm,
    host_key_fingerprint,
    host_key_scan,
)
from clusters.onboarding.services import (
    OnboardingError,
    cluster_onboard,
    readiness_check_request,
)
from clusters.slurm.health import cluster_connection_check
from portal_lib.errors import PortalError

# The add page's first step, kept in the session until confirmed: what was typed and the
# host key the portal fetched (never one sent back by the browser).
PENDING_ADD = "clusters.cluster_add"


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
        "never shown again; leave blank to keep the current one. Not needed where the "
        "cluster trusts the portal's CA: the account then logs in by certificate.",
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
            "session_reach",
            "base_run_dir",
            "default_partition",
            "gpu_model",
            "gpu_peak_bf16_tflops",
            "price_per_gpu_hour",
            "price_per_cpu_hour",
            "is_active",
            "trusts_portal_ca",
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

    def add_view(
        self, request: HttpRequest, form_url: str = "", extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        """Two steps: host and port (the portal fetches the host key), then its fingerprint
        confirmed; only then is the cluster recorded and its readiness report queued."""
        if not self.has_add_permission(request):
            raise PermissionDenied
        if request.method == "POST" and "confirm" in request.POST:
            return self._add_confirm(request)
        form = ClusterHostForm(request.POST if request.method == "POST" else None)
        if form.is_valid():
            data = form.cleaned_data
            try:
                host_key = host_key_scan(data["ssh_host"], data["ssh_port"])
            except HostKeyError as exc:
                form.add_error(None, exc.message)
            else:
                request.session[PENDING_ADD] = {**data, "host_key": host_key}
                return self._confirm_page(request, request.session[PENDING_ADD], None)
        return self._page(request, "add_host.html", form=form)

    def _add_confirm(self, request: HttpRequest) -> HttpResponse:
        pending = request.session.get(PENDING_ADD)
        if not pending:
            self.message_user(
                request,
                "The host key was not fetched in this session: enter the host again.",
                messages.ERROR,
            )
            return redirect("admin:clusters_cluster_add")
        form = ClusterConfirmForm(request.POST)
        if form.is_valid() and form.cleaned_data["fingerprint"].strip():
            try:
                host_key_confirm(pending["host_key"], form.cleaned_data["fingerprint"])
            except HostKeyError as exc:
                form.add_error("fingerprint", exc.message)
        if not form.is_valid():
            return self._confirm_page(request, pending, form)
        try:
            key = form.cleaned_data["new_portal_private_key"]
            onboarded = cluster_onboard(new=pending_new(pending, key))
        except OnboardingError as exc:
            form.add_error(None, exc.message)
            return self._confirm_page(request, pending, form)
        del request.session[PENDING_ADD]
        cluster = onboarded.cluster
        self.log_addition(request, cluster, [{"added": {}}])
        for note in onboarded.notes:
            self.message_user(request, note, messages.INFO)
        try:
            readiness_check_request(cluster=cluster, user=request.user, onboarding=True)
        except PortalError as exc:  # the task queue is down: the cluster page's button retries
            self.message_user(request, f"Cluster {cluster.name} recorded. {exc.message}")
        else:
            self.message_user(
                request,
                f"Cluster {cluster.name} recorded ({cluster.host_key_fingerprint}); its "
                "readiness check started: test jobs run on its nodes, reload this page in a "
                "minute or two for the report.",
                messages.SUCCESS,
            )
        return redirect(reverse("cluster-page", args=[cluster.name]) + "#readiness")

    def _confirm_page(
        self, request: HttpRequest, pending: dict[str, Any], form: ClusterConfirmForm | None
    ) -> HttpResponse:
        return self._page(
            request,
            "add_confirm.html",
            form=form or ClusterConfirmForm(),
            pending=pending,
            host_key_fingerprint=host_key_fingerprint(pending["host_key"]),
        )

    def _page(self, request: HttpRequest, template: str, **context: Any) -> HttpResponse:
        return TemplateResponse(
            request,
            f"admin/clusters/cluster/{template}",
            {
                **self.admin_site.each_context(request),
                "opts": self.model._meta,
                "title": "Add cluster",
                **context,
            },
        )

    @admin.display(description="portal account", boolean=True)
    def trusted_reads(self, cluster: Cluster) -> bool:
        return cluster.has_portal_account

    @admin.display(description="state and billing read as")
    def trust(self, cluster: Cluster) -> str:
        if cluster.has_portal_account:
            how = " by certificate" if cluster.trusts_portal_ca else ""
            return f"the portal account {cluster.portal_username}{how} (no job runs as it)"
        return f"Warning: {cluster.trust_warning}"

    @admin.action(description="Test connection (host key and sinfo)")
    def test_connection(self, request: HttpRequest, queryset: QuerySet[Cluster]) -> None:
        for cluster in queryset:
            check = cluster_connection_check(cluster=cluster)
            level = messages.SUCCESS if check.ok else messages.ERROR
            self.message_user(request, f"{check.cluster}: {check.message}", level)


class ClusterAccountForm(forms.ModelForm):
    """How the account logs in; a pasted key is never sent back to the browser.

    Only a stored-key account keeps a pasted key: switching to a certificate or to a key
    the user installs deletes it.
    """

    new_private_key = forms.CharField(
        label="Private key",
        required=False,
        strip=False,
        widget=WriteOnlyTextarea(attrs={"rows": 6, "autocomplete": "off", "spellcheck": "false"}),
        help_text="Stored key only: paste an unencrypted OpenSSH private key. It is stored "
        "encrypted and never shown again; leave blank to keep the current key.",
    )

    class Meta:
        model = ClusterAccount
        fields = ["cluster", "user", "username", "authentication"]

    def clean(self) -> dict[str, Any]:
        data: dict[str, Any] = super().clean() or {}
        key = data.get("new_private_key", "")
        how = data.get("authentication")
        if how == Authentication.STORED_KEY:
            was_stored = self.instance.authentication == Authentication.STORED_KEY
            if not key and not (self.instance.pk and was_stored and self.instance.private_key):
                self.add_error("new_private_key", "A stored-key account needs its private key.")
        elif key:
            self.add_error(
                "new_private_key",
                "Only a stored-key account takes a pasted key: leave this blank, or choose "
                "'private key pasted by an admin'.",
            )
        return data

    def clean_new_private_key(self) -> str:
        key: str = self.cleaned_data["new_private_key"].strip()
        return _checked_private_key(key) if key else ""

    def save(self, commit: bool = True) -> ClusterAccount:
        account: ClusterAccount = super().save(commit=False)
        if "authentication" in self.changed_data:
            account.private_key = ""  # no key outlives the way in it was made for
            account.key_made_at = None
        if self.cleaned_data.get("new_private_key"):
            account.private_key = self.cleaned_data["new_private_key"]
        if commit:
            account.save()
        return account


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    form = ClusterAccountForm
    list_display = ["username", "cluster", "user", "kind", "authentication", "updated_at"]
    list_filter = ["cluster", "authentication"]
    search_fields = ["username", "user__username", "cluster__name"]
    list_select_related = ["cluster", "user"]
    autocomplete_fields = ["user"]
    fields = ["cluster", "user", "username", "authentication", "new_private_key", "key_status"]
    readonly_fields = ["key_status"]

    @admin.display(description="kind")
    def kind(self, account: ClusterAccount) -> str:
        return "shared service account" if account.is_service_account else "personal"

    @admin.display(description="key on file")
    def key_status(self, account: ClusterAccount) -> str:
        if account.authentication == Authentication.CERTIFICATE:
            return "none: a certificate is signed for each connection"
        if not (account.pk and account.private_key):
            return "not set"
        if account.authentication == Authentication.INSTALLED_KEY:
            return f"made by the portal for the user on {account.key_made_at:%Y-%m-%d %H:%M}"
        return "stored (encrypted)"


@admin.register(CertificateAuthority)
class CertificateAuthorityAdmin(admin.ModelAdmin):
    """Shown, never edited here: `manage.py ssh_ca` creates, rotates and retires them."""

    list_display = ["id", "fingerprint", "created_at", "retired_at"]
    fields = ["fingerprint", "public_key", "created_at", "retired_at"]
    readonly_fields = ["fingerprint", "public_key", "created_at", "retired_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False
