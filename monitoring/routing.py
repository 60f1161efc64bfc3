"""WebSocket routes: the live stream of one job."""

from django.urls import URLPattern, path

from monitoring.consumers import JobConsumer

websocket_urlpatterns: list[URLPattern] = [
    path("ws/jobs/<int:job_id>/", JobConsumer.as_asgi()),
]
