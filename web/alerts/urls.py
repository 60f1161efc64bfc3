"""The alert pages, under /alerts/."""

from django.urls import URLPattern, path

from web.alerts import views as alert_views

urlpatterns: list[URLPattern] = [
    path("", alert_views.alerts_page, name="alerts"),
    path("read/", alert_views.alerts_read, name="alerts-read"),
    path("unread.json", alert_views.alerts_unread, name="alerts-unread"),
    path("rules/", alert_views.alert_rules_page, name="alert-rules"),
    path("rules/<int:rule_id>/delete/", alert_views.alert_rule_delete, name="alert-rule-delete"),
]
