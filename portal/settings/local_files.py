"""The files a local run makes for itself on first start: `.env` with generated secrets
(and the metrics token) and the private `.state` folder. No side effects on import."""

import base64
import secrets
from pathlib import Path


def ensure_dotenv(path: Path) -> None:
    """`.env` (0600) with the secrets a first run makes; the metrics token added once."""
    if path.exists():
        path.chmod(0o600)
    else:
        fernet_key = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode()
        path.touch(mode=0o600)
        path.write_text(
            f"DJANGO_SECRET_KEY={secrets.token_urlsafe(50)}\n"
            f"FIELD_ENCRYPTION_KEYS={fernet_key}\n"
            f"DEMO_PASSWORD={secrets.token_urlsafe(9)}\n"
        )
    # /metrics is on in a local run: its token is made once and printed by `make run`.
    if not any(line.startswith("PORTAL_METRICS_TOKEN=") for line in path.read_text().splitlines()):
        with path.open("a") as handle:
            handle.write(f"PORTAL_METRICS_TOKEN={secrets.token_urlsafe(24)}\n")


def ensure_private_state(state: Path) -> None:
    """The SQLite database (sessions included) and Redis's files: this user's alone."""
    state.mkdir(mode=0o700, exist_ok=True)
    state.chmod(0o700)
    for path in state.glob("db.sqlite3*"):
        path.chmod(0o600)
