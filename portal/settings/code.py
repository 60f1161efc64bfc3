"""Code snapshots' settings: where archives are kept, what an upload may hold unpacked,
what they may cost each project and person, and fetching a git URL. Read from the
environment like the rest (`portal.settings.base` imports them)."""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent
env = environ.Env()

# Code snapshots (jobs.code.snapshots): where archives are kept (one file per content hash), the
# largest upload, what one may hold unpacked (bytes, files), the uncommitted diff a job
# records, and fetching a git URL (jobs.code.fetch: seconds, bytes of the fetched repository).
CODE_SNAPSHOT_DIR = Path(env("CODE_SNAPSHOT_DIR", default=str(BASE_DIR / ".state" / "code")))
CODE_UPLOAD_MAX_BYTES: int = env.int("CODE_UPLOAD_MAX_BYTES", default=100 * 1024 * 1024)
# Any HTTP request's body (portal_lib.body_limit, before Django spools it to disk): the
# largest archive and its form around it.
REQUEST_BODY_MAX_BYTES: int = env.int(
    "REQUEST_BODY_MAX_BYTES", default=CODE_UPLOAD_MAX_BYTES + 1024 * 1024
)
CODE_UNPACKED_MAX_BYTES: int = env.int("CODE_UNPACKED_MAX_BYTES", default=1024 * 1024 * 1024)
# An archive may unpack to this many times its own size, or to the floor at any ratio:
# code compresses 3-10x, a compression bomb thousands of times (0 turns the rule off).
CODE_UNPACKED_MAX_RATIO: int = env.int("CODE_UNPACKED_MAX_RATIO", default=100)
CODE_UNPACKED_RATIO_FLOOR_BYTES: int = env.int(
    "CODE_UNPACKED_RATIO_FLOOR_BYTES", default=64 * 1024 * 1024
)
CODE_MAX_FILES: int = env.int("CODE_MAX_FILES", default=50_000)
CODE_DIFF_MAX_BYTES: int = env.int("CODE_DIFF_MAX_BYTES", default=1024 * 1024)
CODE_GIT_TIMEOUT: float = env.float("CODE_GIT_TIMEOUT", default=120.0)
CODE_GIT_MAX_BYTES: int = env.int("CODE_GIT_MAX_BYTES", default=500 * 1024 * 1024)
# file:// URLs, for the tests' local repositories only; never in a deployment.
CODE_GIT_ALLOW_LOCAL = False
# What code snapshots may cost: a project's archives kept (its own quota, else this), each
# person's uploads in a sliding window (bytes 0: archives counted only; archives 0: no rate),
# and how long a snapshot no job or sweep names is kept after its last use
# (jobs.code.retention, run hourly by beat).
CODE_QUOTA_BYTES: int = env.int("CODE_QUOTA_BYTES", default=2 * 1024 * 1024 * 1024)
CODE_UPLOAD_RATE_LIMIT: int = env.int("CODE_UPLOAD_RATE_LIMIT", default=30)
CODE_UPLOAD_RATE_BYTES: int = env.int("CODE_UPLOAD_RATE_BYTES", default=1024 * 1024 * 1024)
CODE_UPLOAD_RATE_WINDOW: float = env.float("CODE_UPLOAD_RATE_WINDOW", default=3600.0)
CODE_SNAPSHOT_RETENTION: float = env.float("CODE_SNAPSHOT_RETENTION", default=7 * 24 * 3600.0)
