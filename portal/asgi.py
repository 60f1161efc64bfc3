"""ASGI entry point: HTTP through Django, WebSockets through Channels."""

import os
from functools import partialmethod

from django.conf import settings
from django.core.asgi import get_asgi_application

from portal.web_database import pool_web_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.local")
pool_web_connections()
# Django must be set up before the consumers (and their models) are imported.
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from daphne.http_protocol import WebRequest  # noqa: E402

from portal_lib.body_limit import BodyLimit  # noqa: E402
from portal_lib.origins import OriginValidator  # noqa: E402
from web.live.routing import websocket_urlpatterns  # noqa: E402

# Twisted parses a multipart or form POST body into request.args, in daphne's one event
# loop and before any login check (about 1 s per MiB of small parts: every user waited
# behind one anonymous request); daphne never reads those args, it hands the body on.
WebRequest.__init__ = partialmethod(WebRequest.__init__, parsePOSTFormSubmission=False)

application = ProtocolTypeRouter(
    {
        "http": BodyLimit(django_asgi_app, limit=lambda: settings.REQUEST_BODY_MAX_BYTES),
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
