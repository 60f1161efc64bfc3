"""The clusters app's Celery tasks, where Celery's autodiscovery looks for them."""

from clusters.onboarding.tasks import cluster_readiness_check

__all__ = ["cluster_readiness_check"]
