"""`/metrics` in Prometheus's text format, for a scraper that holds the metrics token.

Everything is read at scrape time into a fresh registry (no process-global state:
each web process would otherwise serve its own counts), in a bounded number of
queries whatever the number of jobs. The token is one setting,
`PORTAL_METRICS_TOKEN`, not a personal token: the scraper is a service, not a
person, and what it reads (every project's jobs) is more than any user may see.
"""

import hmac
from collections.abc import Iterator

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_safe
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector

from monitoring.metrics_health import health_families, health_shells, live_counts
from monitoring.metrics_jobs import job_families, job_shells, running_attempts

REALM = 'Bearer realm="metrics"'


class PortalCollector(Collector):
    """The portal's health, its clusters and its running jobs, read when scraped."""

    def collect(self) -> Iterator[Metric]:
        attempts = running_attempts(cap=settings.METRICS_MAX_JOBS)
        counts = live_counts()
        yield from health_families(counts=counts, exported_jobs=len(attempts))
        yield from job_families(attempts)

    def describe(self) -> Iterator[Metric]:
        # The names without reading anything: registering must not run a scrape.
        yield from health_shells().values()
        yield from job_shells().values()


def metrics_text() -> bytes:
    registry = CollectorRegistry(auto_describe=True)
    registry.register(PortalCollector())
    return generate_latest(registry)


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
