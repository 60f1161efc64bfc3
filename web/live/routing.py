"""WebSocket routes: the live stream of one job; a session's JupyterLab sockets."""

from django.urls import URLPattern, path

from web.live.consumers import JobConsumer, JobGate
from web.sessions.consumers import LabGate, LabSocket

websocket_urlpatterns: list[URLPattern] = [
    # URLRouter takes any ASGI application; django-stubs expects a view here.
    path("ws/jobs/<int:job_id>/", JobGate(JobConsumer.as_asgi())),  # type: ignore[arg-type]
    # JupyterLab's own sockets, under its base URL (jobs.interactive.lab_base_url).
    path("sessions/<int:job_id>/lab/<path:rest>", LabGate(LabSocket.as_asgi())),  # type: ignore[arg-type]
]
