"""WebSocket routes: the live stream of one job."""

from django.urls import URLPattern, path

from web.live.consumers import JobConsumer, JobGate

websocket_urlpatterns: list[URLPattern] = [
    # URLRouter takes any ASGI application; django-stubs expects a view here.
    path("ws/jobs/<int:job_id>/", JobGate(JobConsumer.as_asgi())),  # type: ignore[arg-type]
]
