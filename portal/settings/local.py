"""A developer's machine: SQLite unless DATABASE_URL is set, debug on."""

import os

os.environ.setdefault("DJANGO_DEBUG", "true")

from .base import *  # noqa: F403
