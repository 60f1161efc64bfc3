"""A developer's machine: SQLite unless DATABASE_URL is set, debug on.

The first run writes `.env` with freshly generated secrets, so that a clone
works without set-up and keys stay the same from one run to the next.
"""

import base64
import os
import secrets
from pathlib import Path

DOTENV = Path(__file__).resolve().parent.parent.parent / ".env"


def _ensure_dotenv(path: Path) -> None:
    if path.exists():
        return
    fernet_key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
    path.write_text(
        f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
        f"FIELD_ENCRYPTION_KEYS={fernet_key}\n"
        f"DEMO_PASSWORD={secrets.token_urlsafe(9)}\n"
    )
    path.chmod(0o600)


_ensure_dotenv(DOTENV)
# The SQLite database and other local state live here.
(DOTENV.parent / ".state").mkdir(exist_ok=True)
os.environ.setdefault("DJANGO_DEBUG", "true")

from .base import *  # noqa: E402, F403
