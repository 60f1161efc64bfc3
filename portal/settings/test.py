"""Tests: real PostgreSQL and Redis; only speed-ups differ from production."""

import os

# Fixed throwaway secrets: tests must not depend on a developer's `.env`.
os.environ.setdefault("DJANGO_SECRET_KEY", "test-secret-key-not-for-production")
os.environ.setdefault("FIELD_ENCRYPTION_KEYS", "cGNVZ3h2dGJoWk5yWHRsR0NxbW5mV2lLb2Z5Y1l6cDc=")
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/9")

from .base import *  # noqa: F403
from .base import DATABASES

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
