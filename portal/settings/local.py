"""A developer's machine: SQLite unless DATABASE_URL is set, debug on.

The first run writes `.env` with freshly generated secrets, so that a clone
works without set-up and keys stay the same from one run to the next. Only
these settings read `.env`: production takes everything from its environment.
"""

import base64
import os
import secrets
from pathlib import Path

import environ

ROOT = Path(__file__).resolve().parent.parent.parent
DOTENV = ROOT / ".env"
STATE = ROOT / ".state"


def _ensure_dotenv(path: Path) -> None:
    if path.exists():
        path.chmod(0o600)
        return
    fernet_key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    path.touch(mode=0o600)
    path.write_text(
        f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"FIELD_ENCRYPTION_KEYS={fernet_key}\n"
        f"DEMO_PASSWORD={secrets.token_urlsafe(9)}\n"
    )


def _ensure_private_state(state: Path) -> None:
    """The SQLite database (sessions included) and Redis's files: this user's alone."""
    state.mkdir(mode=0o700, exist_ok=True)
    state.chmod(0o700)
    for path in state.glob("db.sqlite3*"):
        path.chmod(0o600)


_ensure_dotenv(DOTENV)
_ensure_private_state(STATE)
environ.Env.read_env(DOTENV, overwrite=False)
os.environ.setdefault("DJANGO_DEBUG", "true")

from .base import *  # noqa: E402, F403
