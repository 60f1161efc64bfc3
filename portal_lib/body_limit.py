"""A cap on an HTTP request's body, kept before Django reads it.

Django's ASGI handler spools a whole body to a temporary file before any view, any
authentication, runs, and a multipart parse copies its files again. A body over the
cap is answered 413 as soon as its declared length or its received bytes pass it, and
Django never sees the request. Daphne (Twisted) buffers a body itself before the
application sees any of it, so in production the proxy refuses it first
(deploy/caddy/Caddyfile's `request_body`).
"""

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
# Django's and Channels' own signatures differ in their mappings' mutability.
ASGIApp = Callable[[Any, Any, Any], Awaitable[None]]


class _OverCap(Exception):
    pass


class BodyLimit:
    """ASGI middleware: refuse HTTP requests whose body is over `limit()` bytes (413)."""

    def __init__(self, app: ASGIApp, *, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit  # read per request: settings may change (tests)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = self.limit()
        if _declared_length(scope) > cap:
            await _refuse(scope, send, cap)
            return
        received = 0

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            received += len(message.get("body", b""))
            if received > cap:
                raise _OverCap
            return message

        try:
            await self.app(scope, counted, send)
        except _OverCap:
            # Raised while Django reads the body, before it could answer.
            await _refuse(scope, send, cap)


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name.lower() == b"content-length":
            digits = value.decode("latin-1").strip().lstrip("0")
            # A malformed length is Django's to refuse; past 19 digits, over any cap (and
            # int() of thousands of digits would be work, or an error).
            if digits.isascii() and digits.isdigit():
                return int(digits) if len(digits) <= 19 else 2**63
    return 0


async def _refuse(scope: Scope, send: Send, cap: int) -> None:
    message = (
        f"The request is over the cap of {cap / (1024 * 1024):.1f} MiB; send a smaller "
        "archive (leave data and checkpoints out of it)."
    )
    if str(scope.get("path", "")).startswith("/api/"):
        body, kind = json.dumps({"detail": message}).encode(), b"application/json"
    else:
        body, kind = message.encode(), b"text/plain; charset=utf-8"
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", kind),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
