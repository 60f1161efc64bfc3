"""Errors under /api/ as JSON, whatever raised them and whether DEBUG is on.

DRF answers its own errors in JSON, but an exception it does not handle (a
database error, one raised in a middleware) becomes Django's 500, and a URL no
route matches Django's 404: with DEBUG on, the technical pages (settings,
source lines, every route), shown to whoever called the API. This middleware is
the outermost one, so it sees those responses after Django has logged them and
puts a short JSON body in their place, keeping the status and headers.
"""

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import cast

from asgiref.sync import iscoroutinefunction
from django.http import HttpRequest, HttpResponseBase, JsonResponse
from django.utils.decorators import sync_and_async_middleware

API_PREFIX = "/api/"
SERVER_ERROR = (
    "The portal failed on this request and logged it; try again in a moment, "
    "and tell its administrators if it keeps failing."
)
_BODY_HEADERS = {"content-type", "content-length"}

SyncHandler = Callable[[HttpRequest], HttpResponseBase]
AsyncHandler = Callable[[HttpRequest], Awaitable[HttpResponseBase]]
Handler = SyncHandler | AsyncHandler


def api_error_body(request: HttpRequest, response: HttpResponseBase) -> HttpResponseBase:
    """The response, or for an API error that is not JSON already, its JSON stand-in."""
    if response.status_code < 400 or not request.path.startswith(API_PREFIX):
        return response
    if "json" in response.get("Content-Type", ""):
        return response
    status = response.status_code
    if status >= 500:
        detail = SERVER_ERROR
    else:
        try:
            detail = HTTPStatus(status).phrase + "."
        except ValueError:
            detail = f"HTTP {status}."
    replaced = JsonResponse({"detail": detail}, status=status)
    for name, value in response.items():
        if name.lower() not in _BODY_HEADERS:
            replaced[name] = value
    return replaced


@sync_and_async_middleware
def api_json_errors(get_response: Handler) -> Handler:
    """Middleware: JSON errors for API clients, under ASGI (async) and in tests (sync)."""
    if iscoroutinefunction(get_response):
        async_get = cast(AsyncHandler, get_response)

        async def middleware_async(request: HttpRequest) -> HttpResponseBase:
            return api_error_body(request, await async_get(request))

        return middleware_async
    sync_get = cast(SyncHandler, get_response)

    def middleware(request: HttpRequest) -> HttpResponseBase:
        return api_error_body(request, sync_get(request))

    return middleware
