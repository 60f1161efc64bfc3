"""WebSocket routes; the live job stream joins here with the monitoring issue."""

from django.urls import URLPattern

websocket_urlpatterns: list[URLPattern] = []
