"""A TrustedUserCAKeys file that several portals may share (the sandbox's login node).

Each portal's lines carry its tag (`portal-ca:<owner>:<ca id>`); a write replaces that
portal's lines only, keeps every other line, under a lock, and lands in one rename, so
that sshd, which reads the file at each certificate login, never sees half of it.
"""

import fcntl
import os
import tempfile
from pathlib import Path

TAG = "portal-ca"


def _owner_of(line: str) -> str | None:
    fields = line.split()
    if len(fields) < 3 or not fields[-1].startswith(f"{TAG}:"):
        return None
    return fields[-1].split(":")[1]


def trusted_keys_write(*, path: Path, owner: str, lines: list[str]) -> None:
    """Make `lines` (tagged with `owner`) the owner's part of the file at `path`."""
    lock_fd = os.open(path.with_name(f".{path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        existing = path.read_text().splitlines() if path.exists() else []
        kept = [line for line in existing if _owner_of(line) != owner]
        text = "".join(f"{line}\n" for line in [*kept, *lines])
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        try:
            with os.fdopen(fd, "w") as handle:
                handle.write(text)
            os.chmod(temporary, 0o644)
            os.replace(temporary, path)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    finally:
        os.close(lock_fd)
