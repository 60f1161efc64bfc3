"""Turns on the shared sandbox cluster: file locks in its state directory.

Every test that uses the sandbox holds a turn: a shared one, or, for one that
disturbs it (stops sshd, kills a slurmd, reconfigures the nodes), the turn alone.
The locks hold across the xdist workers of one run, across runs side by side and
for the benches that reconfigure the sandbox (bench/soak.py). A turnstile lock
keeps a waiting exclusive holder from being starved by a stream of shared ones.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def locked(path: Path, mode: int) -> int:
    """An open descriptor of `path` holding a flock in `mode`; closing it releases it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


@contextmanager
def sandbox_turn(state_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """A shared (or, for a disturbing holder, exclusive) turn on the sandbox."""
    locks = Path(state_dir) / "test-locks"
    turnstile = locked(locks / "turnstile", fcntl.LOCK_EX)
    try:
        turn = locked(locks / "turn", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        if not exclusive:
            os.close(turnstile)
    try:
        yield
    finally:
        os.close(turn)
        if exclusive:
            os.close(turnstile)
