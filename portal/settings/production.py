"""Production: every secret and endpoint from the environment; nothing has a default.

No `.env` is read here (that is the local settings'), and the portal refuses to
start rather than run with a missing or default secret.
"""

from pathlib import Path
from urllib.parse import urlsplit

from django.core.exceptions import ImproperlyConfigured

from .base import *  # noqa: F403
from .base import (
    PORTAL_METRICS_TOKEN,
    REDIS_URL,
    SECRET_KEY,
    SSO_FORM_ACTION_ORIGINS,
    STATIC_ROOT,
    env,
)

# Values that must never reach production: the test settings' and the image build's.
KNOWN_DEFAULTS = {"test-secret-key-not-for-production", "build", "portal", "postgres", ""}


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ImproperlyConfigured(message)


_require(
    len(SECRET_KEY) >= 40 and SECRET_KEY not in KNOWN_DEFAULTS,
    "Set DJANGO_SECRET_KEY to a random value of 40 characters or more.",
)
DEBUG = False
# Where collectstatic writes and WhiteNoise serves from. A machine without containers runs
# the portal as a user who cannot write into its (root-owned) code tree: a directory of
# its own, e.g. /var/lib/portal/static (docs/production-shape.md).
STATIC_ROOT = Path(env("DJANGO_STATIC_ROOT", default=str(STATIC_ROOT)))
DATABASES = {"default": env.db("DATABASE_URL")}
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
_require(
    DATABASES["default"].get("PASSWORD", "") not in KNOWN_DEFAULTS,
    "Give DATABASE_URL a real password: postgres://user:PASSWORD@host/db.",
)
_require(
    urlsplit(REDIS_URL).password not in (None, *KNOWN_DEFAULTS),
    "Give REDIS_URL a password (redis://:PASSWORD@host:6379/0) and start Redis with it.",
)
_require(
    urlsplit(env("CELERY_BROKER_URL", default=REDIS_URL)).password not in (None, *KNOWN_DEFAULTS),
    "Give CELERY_BROKER_URL a password, as REDIS_URL.",
)
# /metrics shows every project's jobs: off (empty), or behind a token hard to guess.
_require(
    not PORTAL_METRICS_TOKEN
    or (len(PORTAL_METRICS_TOKEN) >= 32 and PORTAL_METRICS_TOKEN not in KNOWN_DEFAULTS),
    "Set PORTAL_METRICS_TOKEN to a random value of 32 characters or more (or leave it empty).",
)

# Trust X-Forwarded-Proto only where a proxy that sets it stands in front (the compose
# proxy): otherwise any client could claim https.
if env.bool("DJANGO_BEHIND_PROXY", default=False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env.bool("DJANGO_SECURE_SSL_REDIRECT", default=True)
# Prometheus scrapes web directly on the compose network (plain http, its bearer token):
# a redirect to https would end every scrape.
SECURE_REDIRECT_EXEMPT = [r"^metrics$"]
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
# A year, subdomains too: browsers never try plain http again.
SECURE_HSTS_SECONDS = env.int("DJANGO_SECURE_HSTS_SECONDS", default=31_536_000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = env.bool("DJANGO_SECURE_HSTS_PRELOAD", default=False)
# Preloading is a site's own choice, off by default on purpose (a domain on the browsers'
# list stays https-only, subdomains too, for months after it asks to leave): check
# --deploy says nothing of the default, so that its output is clean when all is right.
if not SECURE_HSTS_PRELOAD:
    SILENCED_SYSTEM_CHECKS = ["security.W021"]
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Content-Security-Policy (django-csp): everything from the portal itself, no inline
# script, no framing; WebSockets back to the same host.
INSTALLED_APPS = [*INSTALLED_APPS, "csp"]  # noqa: F405
MIDDLEWARE = [*MIDDLEWARE, "csp.middleware.CSPMiddleware"]  # noqa: F405
CONTENT_SECURITY_POLICY = {
    # The Swagger page runs Swagger UI's own inline start-up script.
    "EXCLUDE_URL_PREFIXES": ["/api/docs/"],
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        # Plotly adds its stylesheet rules at run time; styles cannot run code.
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "frame-ancestors": ["'none'"],
        "base-uri": ["'self'"],
        # Log-out's answer may send the browser on to the OpenID provider (docs/sso.md).
        "form-action": ["'self'", *SSO_FORM_ACTION_ORIGINS],
        "object-src": ["'none'"],
    },
}
