"""Tests: real PostgreSQL and Redis; only speed-ups differ from production."""

import os

# Fixed throwaway secrets: tests must not depend on a developer's `.env`.
os.environ.setdefault("DJANGO_SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("FIELD_ENCRYPTION_KEYS", "cGNVZ3h2dGJoWk5yWHRsR0NxbW5mV2lLb2Z5Y1l6cDc=")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")


def _redis_for_xdist_worker() -> None:
    """Under pytest-xdist, worker gwN takes the Redis database N + 1 after the configured one.

    pytest-django gives each worker its own test database; this gives it its own
    queue and channel layer too. The servers a worker starts inherit the result
    (and the marker, so that they do not shift it again).
    """
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or os.environ.get("PORTAL_REDIS_WORKER") == worker:
        return
    base, _, db = os.environ["REDIS_URL"].rstrip("/").rpartition("/")
    number = int(db or 0) + 1 + int(worker[2:])
    if number > 15:
        raise RuntimeError(f"{worker} would need Redis database {number}: lower REDIS_URL's")
    os.environ["REDIS_URL"] = f"{base}/{number}"
    os.environ.pop("CELERY_BROKER_URL", None)
    os.environ["PORTAL_REDIS_WORKER"] = worker


_redis_for_xdist_worker()

from .base import *  # noqa: E402, F403
from .base import DATABASES  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# A test server serves static files from the finders (no collectstatic in tests).
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# A test's flush (TRUNCATE) can deadlock with the e2e Celery worker's queries.
# The worker runs with a short deadlock_timeout, so PostgreSQL aborts the
# worker's statement (its next poll retries) rather than the test's flush.
DATABASES["default"]["OPTIONS"] = {
    "options": f"-c deadlock_timeout={os.environ.get('TEST_DEADLOCK_TIMEOUT', '5s')}"
}
# Tests submit many jobs at once to exercise quotas and polls; the submit rate is tested
# on its own (tests/security/test_fair_use.py sets the production default back).
SUBMIT_RATE_LIMIT = 10_000
# The end-to-end alert test's webhook receiver listens on loopback.
ALERT_WEBHOOK_ALLOW_LOOPBACK = True
