"""Settings shared by every environment; each value comes from the environment."""

from datetime import timedelta
from pathlib import Path

import environ
from kombu import Queue

from .schema_names import SCHEMA_ENUM_NAMES

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
# No `.env` here: only the local settings read one (a developer's generated secrets).

SECRET_KEY: str = env("DJANGO_SECRET_KEY")
DEBUG: bool = env.bool("DJANGO_DEBUG", default=False)
ALLOWED_HOSTS: list[str] = env.list("DJANGO_ALLOWED_HOSTS", default=["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS: list[str] = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI served from our static files, not a CDN.
    "drf_spectacular_sidecar",
    "projects",
    "clusters",
    "jobs",
    "monitoring",
    "sweeps",
    "accounts",
    # Login throttling: failed logins per username and address (web login and admin).
    "axes",
]

MIDDLEWARE = [
    # First, so that it sees every response: an API client gets JSON errors, never a page.
    "web.api_errors.api_json_errors",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A session signed in through the OpenID provider is checked there again every
    # OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS (docs/sso.md, "When access ends").
    "accounts.sso.refresh.ProviderSessionCheck",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes asks: it turns a locked-out login into its refusal page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "web.urls"
ASGI_APPLICATION = "portal.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "web.outbox.outbox_enabled",
            ],
        },
    },
]

# SQLite is the embedded default for a local run; production and tests set PostgreSQL.
DATABASES = {
    "default": env.db("DATABASE_URL", default=f"sqlite:///{BASE_DIR / '.state' / 'db.sqlite3'}")
}
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"]["CONN_MAX_AGE"] = env.int("DATABASE_CONN_MAX_AGE", default=60)
# The web (ASGI) process borrows from a pool of this size instead (portal.web_database).
DATABASE_POOL_MIN_SIZE = env.int("DATABASE_POOL_MIN_SIZE", default=2)
DATABASE_POOL_MAX_SIZE = env.int("DATABASE_POOL_MAX_SIZE", default=20)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A few people at once: WAL lets reads go on beside a write; a transaction takes the
    # write lock when it begins (IMMEDIATE), so one that read first cannot fail at once
    # with "database is locked" when it writes; and a writer waits up to `timeout` s for
    # the lock instead of failing. synchronous=NORMAL is WAL's usual pairing: a power cut
    # may lose the last commits, never the file.
    DATABASES["default"]["OPTIONS"] = {
        "transaction_mode": "IMMEDIATE",
        "timeout": env.float("SQLITE_BUSY_TIMEOUT", default=20.0),
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    # First: refuses a username and address with too many failures before any check.
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
    # Single sign-on (portal/settings/sso.py, docs/sso.md): each answers only once set.
    "web.accounts.backends.DirectoryBackend",
    "web.accounts.backends.OIDCBackend",
]
AXES_FAILURE_LIMIT: int = env.int("AXES_FAILURE_LIMIT", default=5)
AXES_COOLOFF_TIME = timedelta(minutes=env.int("AXES_COOLOFF_MINUTES", default=15))
# The pair, not the address alone (a lab behind one NAT) nor the name alone (anyone
# could lock a colleague out).
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
AXES_VERBOSE = False  # no banner on every start; lockouts are still logged
from .sso import *  # noqa: E402, F403

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATICFILES_FINDERS = [
    "django.contrib.staticfiles.finders.FileSystemFinder",
    "django.contrib.staticfiles.finders.AppDirectoriesFinder",
    "portal_lib.staticfinders.PlotlyFinder",
]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

REDIS_URL: str = env("REDIS_URL", default="redis://127.0.0.1:6379/0")

# JSON, never pickle: whatever reaches Redis must not become code when read. (Named, so
# that the tests, on a local-memory cache, check the production options against Redis.)
CACHES_PRODUCTION_OPTIONS = {"serializer": "portal_lib.cache.JSONSerializer"}
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": CACHES_PRODUCTION_OPTIONS,
    }
}

# The dataclasses the cache may hold and build back (portal_lib.cache): nothing else.
CACHE_JSON_TYPES = [
    "clusters.status.ClusterStatus",
    "clusters.status.PartitionStatus",
    "clusters.slurm.scontrol.Node",
    "clusters.inventory.PartitionLimits",
    "clusters.slurm.test_only.TestOnly",
]

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # The socket timeout must outlast channels-redis's 5 s blocking read,
            # or a quiet consumer fails with a TimeoutError every 5 s.
            # redis-py's pool refuses a connection past its max (100 by default): with a
            # hundred pages opening at once, a WebSocket got a 500 (bench/latency.py).
            # redis-py 8 gives a connection 5 s to connect and say hello: with two hundred
            # pages opening at once on a busy box, one did not (tests/portal/test_channels.py).
            # A Redis that is down refuses at once; only a lost host waits this long.
            "hosts": [
                {
                    "address": REDIS_URL,
                    "socket_timeout": 30,
                    "socket_connect_timeout": 30,
                    "max_connections": 2000,
                }
            ],
            "capacity": 1000,
            "expiry": 30,
        },
    }
}

# Celery: messages are hints, the database is the truth, so tasks are acked late
# and may run twice; every task must be idempotent.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", default=REDIS_URL)
# What a worker started without -Q consumes: the default queue and the polls' own
# (portal_lib.worker_queues.POLLS_QUEUE), taken in turn.
CELERY_TASK_DEFAULT_QUEUE = "celery"
CELERY_TASK_QUEUES = (Queue("celery"), Queue("polls"))
# Beat's poll fan-out on the polls queue too, not behind a burst of submissions.
CELERY_TASK_ROUTES = ("portal.celery.route_task",)
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=60)
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=90)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# kombu's Redis transport, but a lost Redis does not end the worker (portal/broker.py).
CELERY_BROKER_TRANSPORT = "portal.broker:Transport"
# Tries the broker again every second once it is lost, not after 2, 4, 6 ... s.
CELERY_WORKER_CONSUMER = "portal.worker_consumer:Consumer"
CELERY_TIMEZONE = TIME_ZONE
# Celery's Django fixup closes the database connection around every task unless this is
# set (a new PostgreSQL backend several times a second per worker). Tasks keep theirs,
# closed by portal.celery as Django closes a request's (past CONN_MAX_AGE, or unusable).
CELERY_DB_REUSE_MAX = 1_000_000
# How often live jobs are polled (one agent call per cluster account per poll).
POLL_INTERVAL: float = env.float("POLL_INTERVAL", default=1.0)
# Slurm's start estimates of pending jobs are stored at most this often per cluster.
QUEUE_ESTIMATE_INTERVAL: float = env.float("QUEUE_ESTIMATE_INTERVAL", default=180.0)
CELERY_BEAT_SCHEDULE: dict[str, dict[str, object]] = {
    # Sweeps: prune losing trials, record ended ones, start the next (sweeps.tick).
    "advance-sweeps": {
        "task": "sweeps.tasks.advance_sweeps",
        "schedule": env.float("SWEEP_TICK_INTERVAL", default=2.0),
        "options": {"expires": 10.0},
    },
    "poll-active-clusters": {
        "task": "jobs.tasks.poll_active_clusters",
        "schedule": POLL_INTERVAL,
        # A poll that could not start in time is pointless: the next one comes.
        "options": {"expires": max(POLL_INTERVAL * 2, 2.0)},
    },
    "reconcile-attempts": {
        "task": "jobs.tasks.reconcile_attempts",
        "schedule": env.float("RECONCILE_INTERVAL", default=30.0),
        "options": {"expires": 30.0},
    },
    # Ended attempts whose charge task was lost: charged from the portal's times.
    "reconcile-reservations": {
        "task": "jobs.tasks.reconcile_charges",
        "schedule": 300.0,
        "options": {"expires": 300.0},
    },
    # Efficiency cards of ended attempts: missing ones, and those made before their charge.
    "refresh-efficiency-cards": {
        "task": "monitoring.tasks.refresh_efficiency_cards",
        "schedule": env.float("EFFICIENCY_REFRESH_INTERVAL", default=15.0),
        "options": {"expires": 30.0},
    },
    # Code snapshots no job or sweep names, unused for CODE_SNAPSHOT_RETENTION: removed.
    "remove-unused-code-snapshots": {
        "task": "jobs.tasks.remove_unused_code_snapshots",
        "schedule": 3600.0,
        "options": {"expires": 3600.0},
    },
    # Portal users the directory no longer has are disabled (accounts.sso.sweep).
    "sweep-directory": {
        "task": "accounts.tasks.sweep_directory",
        "schedule": LDAP_SWEEP_INTERVAL,  # noqa: F405 - portal/settings/sso.py
        "options": {"expires": LDAP_SWEEP_INTERVAL},  # noqa: F405
    },
    # Last week's goodput mail to project owners: hourly, sent once per project and week.
    "send-goodput-digests": {
        "task": "monitoring.tasks.send_goodput_digests",
        "schedule": env.float("GOODPUT_DIGEST_INTERVAL", default=3600.0),
        "options": {"expires": 3600.0},
    },
    # Checkpoint retention rules and project storage quotas (docs/checkpoints.md).
    "apply-checkpoint-rules": {
        "task": "monitoring.tasks.apply_checkpoint_rules",
        "schedule": env.float("CHECKPOINT_RULES_INTERVAL", default=600.0),
        "options": {"expires": 600.0},
    },
}
# A GPU under this utilisation counts as idle on a card, unless the project's idle policy
# sets its own threshold.
EFFICIENCY_IDLE_PERCENT: int = env.int("EFFICIENCY_IDLE_PERCENT", default=10)
# Open job WebSockets per user, across every web process (web.live.consumers).
WEBSOCKETS_PER_USER: int = env.int("WEBSOCKETS_PER_USER", default=16)
# Budget mails (80 % and 100 %) and opt-in job-end mails; the console backend by default.
EMAIL_BACKEND = env("EMAIL_BACKEND", default="django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env("EMAIL_HOST", default="localhost")
EMAIL_PORT = env.int("EMAIL_PORT", default=25)
DEFAULT_FROM_EMAIL = env("DEFAULT_FROM_EMAIL", default="portal@localhost")
# A local run's mail as files, shown to each person on /mail/ (portal_lib.outbox); off: "".
OUTBOX_DIR: str = env("OUTBOX_DIR", default="")
# Where people reach the portal: links in mails (the weekly goodput digest) start with it.
PORTAL_URL: str = env("PORTAL_URL", default="http://127.0.0.1:8000")
QUOTA_ALERT_THRESHOLDS = (80, 100)
# Alert webhooks (monitoring.alerts.delivery): seconds per POST, and whether a URL may
# resolve to loopback (only the tests' receiver; private and link-local stay refused).
ALERT_WEBHOOK_TIMEOUT: float = env.float("ALERT_WEBHOOK_TIMEOUT", default=5.0)
ALERT_WEBHOOK_ALLOW_LOOPBACK = False
# Log bytes kept per file in the database; older ones are read from the cluster.
LOG_KEEP_BYTES: int = env.int("LOG_KEEP_BYTES", default=64 * 1024 * 1024)
# Files placed in every run directory beside the batch script (name -> local path):
# the metrics helper a training script imports with `from portal_metrics import log`, and
# the sitecustomize that installs its stack-dump hook in every Python process of the job.
RUN_DIR_FILES: dict[str, Path] = {
    "portal_metrics.py": BASE_DIR / "monitoring" / "on_cluster" / "portal_metrics.py",
    "sitecustomize.py": BASE_DIR / "monitoring" / "on_cluster" / "portal_sitecustomize.py",
    "portal_preflight.py": BASE_DIR / "monitoring" / "on_cluster" / "portal_preflight.py",
}
# Code snapshots: what an upload may hold and cost (portal/settings/code.py).
from .code import *  # noqa: E402, F403

# The node health ledger and bad nodes' avoidance (portal/settings/nodes.py).
from .nodes import *  # noqa: E402, F403

# Interactive sessions: who opens them, what the proxy forwards (portal/settings/sessions.py).
from .sessions import *  # noqa: E402, F403

# Hang detection (monitoring.hangs.rules): no step on any rank for max(floor, multiple x the
# recent step interval) seconds is a hang; no first step within startup seconds, a stall.
# A job spec may set its own multiple, floor and startup window.
HANG_POLICY: dict[str, float] = {
    "multiple": env.float("HANG_MULTIPLE", default=10.0),
    "floor": env.float("HANG_FLOOR_SECONDS", default=300.0),
    "startup": env.float("HANG_STARTUP_SECONDS", default=1800.0),
    # Seconds a flagged attempt waits for its ranks' stacks before a restart cancels it.
    "stack_wait": env.float("HANG_STACK_WAIT_SECONDS", default=15.0),
    # A declared pause longer than this is not an excuse any more.
    "max_pause": env.float("HANG_MAX_PAUSE_SECONDS", default=3600.0),
}
# A submission in flight longer than this (seconds) is re-driven by the reconciler.
SUBMIT_STUCK_AFTER: float = env.float("SUBMIT_STUCK_AFTER", default=60.0)
# Fair use: jobs one person may submit in a sliding window (web, API and clones together);
# 0 switches the limit off.
SUBMIT_RATE_LIMIT: int = env.int("SUBMIT_RATE_LIMIT", default=20)
SUBMIT_RATE_WINDOW: float = env.float("SUBMIT_RATE_WINDOW", default=60.0)

# /metrics (Prometheus): the bearer token a scraper must send (empty: the endpoint is off),
# the most running jobs given per-job series (the oldest started first), and how old a
# GPU's last sample may be and still be served as its value now.
PORTAL_METRICS_TOKEN: str = env("PORTAL_METRICS_TOKEN", default="")
METRICS_MAX_JOBS: int = env.int("METRICS_MAX_JOBS", default=500)
METRICS_SAMPLE_MAX_AGE: float = env.float("METRICS_SAMPLE_MAX_AGE", default=300.0)

# Private keys of cluster accounts are encrypted with these Fernet keys; the
# first encrypts, all decrypt, so a key can be rotated without a migration.
FIELD_ENCRYPTION_KEYS: list[str] = env.list("FIELD_ENCRYPTION_KEYS")

# SSH logins without stored keys (docs/ssh-certificates.md): how long a certificate the
# portal signs is valid for a login (a pooled connection outlives it), and the portal's
# addresses as the login nodes see its connections (a certificate's source-address, the
# self-service key's from="...").
SSH_CERTIFICATE_MINUTES: int = env.int("SSH_CERTIFICATE_MINUTES", default=5)
SSH_PORTAL_ADDRESSES: list[str] = env.list("SSH_PORTAL_ADDRESSES", default=["127.0.0.1", "::1"])

# Where `manage.py sandbox` keeps the sandbox cluster's state.
SANDBOX_STATE_DIR = Path(env("SANDBOX_STATE_DIR", default=str(BASE_DIR / ".sandbox")))

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # A personal token first: it answers 401 with a Bearer challenge when missing.
        "accounts.authentication.PersonalTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "accounts.authentication.TokenScopePermission",
    ],
    "DEFAULT_THROTTLE_CLASSES": ["accounts.authentication.TokenRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"token": env("API_RATE_PER_TOKEN", default="1200/min")},
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.CursorPagination",
    "PAGE_SIZE": 50,
    # `format` is a parameter of our own endpoints, not DRF's renderer switch.
    "URL_FORMAT_OVERRIDE": None,
    # The error family (portal_lib.errors) answers with its own status and message.
    "EXCEPTION_HANDLER": "portal_lib.drf.exception_handler",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "GPU training-job portal API",
    "DESCRIPTION": (
        "Everything the browser does, for notebooks and scripts. Authenticate with "
        "`Authorization: Bearer <token>` (a personal token from /account/tokens/); "
        "list endpoints only ever show the caller's projects."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    "SERVE_AUTHENTICATION": [
        "accounts.authentication.PersonalTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": SCHEMA_ENUM_NAMES,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "accounts.schema.add_error_responses",
    ],
}

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_AGE = int(timedelta(days=14).total_seconds())
X_FRAME_OPTIONS = "DENY"

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env("LOG_LEVEL", default="INFO")},
}
