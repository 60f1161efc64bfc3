"""The WebSocket Origin check: scheme, host and port must be the page's own.

Channels' AllowedHostsOriginValidator compares the host name alone, so a page
on `http://portal:8080` or any port of an allowed host could open a socket
with the victim's cookies. Here the Origin must equal the address the socket
itself was opened on (the Host header, with http/https for ws/wss), that host
must be allowed, or the Origin must be one of CSRF_TRUSTED_ORIGINS exactly.
"""

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.http.request import validate_host

DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_tuple(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an origin like `https://portal.example:8443`; None if malformed."""
    try:
        parts = urlsplit(url.strip().lower())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    if parts.path not in ("", "/") or parts.query or parts.username or parts.password:
        return None
    return parts.scheme, parts.hostname, port or DEFAULT_PORTS[parts.scheme]


def _headers(scope: dict[str, Any]) -> dict[bytes, bytes]:
    return {name.lower(): value for name, value in scope.get("headers", [])}


def _page_scheme(scope: dict[str, Any], headers: dict[bytes, bytes]) -> str:
    """The scheme of the pages: https for wss, or as the trusted proxy says (see production)."""
    proxy = getattr(settings, "SECURE_PROXY_SSL_HEADER", None)
    if proxy:
        header, secure_value = proxy
        name = header.removeprefix("HTTP_").replace("_", "-").lower().encode()
        if headers.get(name, b"").split(b",")[0].strip().decode("latin-1") == secure_value:
            return "https"
    return "https" if scope.get("scheme") == "wss" else "http"


def origin_allowed(scope: dict[str, Any]) -> bool:
    headers = _headers(scope)
    origin = origin_tuple(headers.get(b"origin", b"").decode("latin-1"))
    if origin is None:
        return False
    trusted = {origin_tuple(url) for url in settings.CSRF_TRUSTED_ORIGINS}
    if origin in trusted:
        return True
    host = headers.get(b"host", b"").decode("latin-1")
    own = origin_tuple(f"{_page_scheme(scope, headers)}://{host}") if host else None
    return own == origin and validate_host(origin[1], settings.ALLOWED_HOSTS)


async def deny(receive: Any, send: Any) -> None:
    """Refuse a WebSocket before it opens (the server answers the handshake with 403).

    Plain ASGI, not Channels' WebsocketDenier: a consumer first subscribes to the channel
    layer and, once refused, lingers in the layer's blocking read until its timeout, so
    a stream of refused sockets would pile up tasks.
    """
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": 1008})


class OriginValidator:
    """ASGI middleware: a WebSocket whose Origin is not the page's own is denied (403)."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket" and not origin_allowed(scope):
            return await deny(receive, send)
        return await self.application(scope, receive, send)
