"""The user's alerts (the top bar's list and count) and the page where they set rules."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from monitoring.alerts import services
from monitoring.alerts.delivery import alert_path
from monitoring.alerts.rules import KIND_SETTINGS, SERIES, rule_settings, rule_settings_text
from monitoring.models import Alert, AlertRule
from portal_lib.bounds import row_id
from portal_lib.errors import form_add_error
from web.alerts.forms import AlertRuleForm
from web.auth import request_user

LISTED = 200
NOTIFIED = 5


@login_required
@require_GET
def alerts_page(request: HttpRequest) -> HttpResponse:
    alerts = list(
        Alert.objects.filter(user=request_user(request))
        .select_related("job", "attempt")
        .order_by("-fired_at", "-pk")[:LISTED]
    )
    rows = [{"alert": a, "url": alert_path(a)} for a in alerts]
    return render(request, "monitoring/alerts.html", {"rows": rows})


@login_required
@require_POST
def alerts_read(request: HttpRequest) -> HttpResponse:
    """Marks one alert (`alert`) or all of the user's alerts read."""
    alert_id = request.POST.get("alert", "")
    chosen = (row_id(alert_id) or 0) if alert_id else None
    services.alerts_mark_read(user=request_user(request), alert_id=chosen)
    return HttpResponseRedirect(reverse("alerts"))


@login_required
@require_GET
def alerts_unread(request: HttpRequest) -> JsonResponse:
    """The top bar's count and the newest unread alerts, for the browser's notifications."""
    unread = Alert.objects.filter(user=request_user(request), read_at=None, rule__to_portal=True)
    newest = list(unread.select_related("attempt").order_by("-pk")[:NOTIFIED])
    return JsonResponse(
        {
            "count": unread.count(),
            "alerts": [{"id": a.pk, "message": a.message, "url": alert_path(a)} for a in newest],
        }
    )


@login_required
def alert_rules_page(request: HttpRequest) -> HttpResponse:
    user = request_user(request)
    if request.method == "POST":
        form = AlertRuleForm(request.POST, user=user)
        if form.is_valid():
            try:
                rule = services.alert_rule_add(rule=form.save(commit=False), owner=user)
            except services.DuplicateRule as exc:  # added meanwhile, by another post
                form_add_error(form, exc)
            else:
                messages.success(request, f"Alert rule added: {rule.get_kind_display()}.")
                return HttpResponseRedirect(reverse("alert-rules"))
    else:
        form = AlertRuleForm(user=user)
    rules = AlertRule.objects.filter(owner=user).select_related("project").order_by("pk")
    # Each rule with the settings its kind reads: a "Job ended" rule has no series to show.
    rows = [
        {
            "rule": rule,
            "series": rule_settings(rule).get(SERIES, ""),
            "settings": rule_settings_text(rule),
        }
        for rule in rules
    ]
    return render(
        request,
        "monitoring/alert_rules.html",
        {
            "form": form,
            "rows": rows,
            "show_series": any(row["series"] for row in rows),
            "kind_settings": {str(kind): list(names) for kind, names in KIND_SETTINGS.items()},
        },
    )


@login_required
@require_POST
def alert_rule_delete(request: HttpRequest, rule_id: int) -> HttpResponse:
    if services.alert_rule_delete(owner=request_user(request), rule_id=rule_id):
        messages.success(request, "Alert rule deleted.")
    else:
        messages.error(request, "No such rule of yours.")
    return HttpResponseRedirect(reverse("alert-rules"))
