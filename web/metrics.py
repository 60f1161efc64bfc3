"""`/metrics` for a scraper that holds the metrics token (`PORTAL_METRICS_TOKEN`)."""

import hmac

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4

from monitoring.prometheus.exposition import metrics_text

REALM = 'Bearer realm="metrics"'


def _refusal(status: int, text: str) -> HttpResponse:
    response = HttpResponse(text + "\n", status=status, content_type="text/plain; charset=utf-8")
    if status == 401:
        response["WWW-Authenticate"] = REALM
    return response


def _token_refusal(request: HttpRequest) -> HttpResponse | None:
    expected: str = settings.PORTAL_METRICS_TOKEN
    if not expected:
        return _refusal(403, "The metrics endpoint is off: set PORTAL_METRICS_TOKEN to enable it.")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        return _refusal(401, "Send the metrics token as 'Authorization: Bearer <token>'.")
    if not hmac.compare_digest(given.strip().encode(), expected.encode()):
        return _refusal(403, "Wrong metrics token.")
    return None


@require_safe
def metrics_view(request: HttpRequest) -> HttpResponse:
    refusal = _token_refusal(request)
    if refusal is not None:
        return refusal
    # The text format every Prometheus reads (2.x included: Debian's); names are plain ASCII.
    return HttpResponse(metrics_text(), content_type=CONTENT_TYPE_PLAIN_0_0_4)
