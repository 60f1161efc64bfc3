"""The one translation of the error family to HTTP: REST_FRAMEWORK's EXCEPTION_HANDLER."""

from typing import Any

from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from portal_lib.errors import PortalError, RateLimited


def as_api_exception(exc: PortalError) -> exceptions.APIException:
    """DRF's own shapes: a 400 reads like a ValidationError, anything else like `{"detail"}`.

    A RateLimited is DRF's Throttled: a 429 with Retry-After.
    """
    if isinstance(exc, RateLimited):
        throttled = exceptions.Throttled(wait=exc.retry_after, code=exc.code)
        throttled.detail = exceptions.ErrorDetail(exc.message, code=exc.code)
        return throttled
    if exc.status == 400:
        # Field errors as DRF gives them; a refusal without a field under non_field_errors.
        return exceptions.ValidationError(
            exc.errors or {"non_field_errors": [exc.message]}, code=exc.code
        )
    api_exc = exceptions.APIException(exc.message, code=exc.code)
    api_exc.status_code = exc.status
    return api_exc


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, PortalError):
        exc = as_api_exception(exc)
    return drf_exception_handler(exc, context)
