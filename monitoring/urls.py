"""REST endpoints the job page reads: log ranges and series (the monitoring issue)."""

from django.urls import URLPattern

urlpatterns: list[URLPattern] = []
