"""A developer's machine: SQLite unless DATABASE_URL is set, debug on.

The first run writes `.env` with freshly generated secrets, so that a clone
works without set-up and keys stay the same from one run to the next. Only
these settings read `.env`: production takes everything from its environment.
"""

import os
from pathlib import Path

import environ

from .local_files import ensure_dotenv, ensure_private_state

ROOT = Path(__file__).resolve().parent.parent.parent
DOTENV = ROOT / ".env"
STATE = ROOT / ".state"


ensure_dotenv(DOTENV)
ensure_private_state(STATE)
environ.Env.read_env(DOTENV, overwrite=False)
os.environ.setdefault("DJANGO_DEBUG", "true")
# No mail server here: mail is kept as files and shown on /mail/ (portal_lib.outbox).
os.environ.setdefault("EMAIL_BACKEND", "portal_lib.outbox.OutboxBackend")
os.environ.setdefault("OUTBOX_DIR", str(STATE / "outbox"))

from .base import *  # noqa: E402, F403
