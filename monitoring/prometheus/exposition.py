"""`/metrics` in Prometheus's text format (served to the metrics token by `web.metrics`).

Everything is read at scrape time into a fresh registry (no process-global state:
each web process would otherwise serve its own counts), in a bounded number of
queries whatever the number of jobs. The token is one setting,
`PORTAL_METRICS_TOKEN`, not a personal token: the scraper is a service, not a
person, and what it reads (every project's jobs) is more than any user may see.
"""

from collections.abc import Iterator

from django.conf import settings
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from monitoring.prometheus.health import health_families, health_shells, live_counts
from monitoring.prometheus.jobs import job_families, job_shells, running_attempts


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
