"""`make test` runs two pytest processes side by side; the sandbox is shared fairly.

Most of the suite's time is spent waiting on Slurm, so `bin/dev test` runs a
"main" shard (the sandbox tests) beside a "side" shard (every test that needs no
sandbox, plus a few sandbox tests that mostly wait, such as a Slurm time limit),
each with its own test database and Redis database.

Sandbox tests of both shards hold a shared turn; a test marked
`sandbox_exclusive` (it stops sshd, kills a slurmd, shims sbatch) holds the
turn alone. A turnstile lock keeps a waiting exclusive test from being starved
by a stream of shared ones.
"""

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SHARD = os.environ.get("PORTAL_TEST_SHARD", "")  # "main", "side" or "" (everything)
# Sandbox tests that spend their time waiting and disturb no one: the side shard's.
SIDE_SANDBOX_TESTS = frozenset(
    {
        "tests/e2e/test_job_lifecycle.py::test_exit_status_cancel_and_time_limit",
        "tests/clients/test_notebook.py::test_example_notebook_runs_the_ddp_example",
        "tests/e2e/test_resume.py::test_a_killed_rank_resumes_from_the_latest_checkpoint",
    }
)


def uses_sandbox(item: pytest.Item) -> bool:
    return "sandbox_info" in getattr(item, "fixturenames", ())


def in_side_shard(item: pytest.Item) -> bool:
    return not uses_sandbox(item) or item.nodeid in SIDE_SANDBOX_TESTS


def select(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep this shard's tests; the side shard starts with its sandbox tests."""
    if SHARD not in ("main", "side"):
        return
    keep = [item for item in items if in_side_shard(item) == (SHARD == "side")]
    dropped = [item for item in items if in_side_shard(item) != (SHARD == "side")]
    if SHARD == "side":
        keep.sort(key=lambda item: not uses_sandbox(item))
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep


def _locked(path: Path, mode: int) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, mode)
    return fd


@contextmanager
def sandbox_turn(state_dir: Path, *, exclusive: bool) -> Iterator[None]:
    """A shared (or, for a disturbing test, exclusive) turn on the sandbox."""
    locks = Path(state_dir) / "test-locks"
    turnstile = _locked(locks / "turnstile", fcntl.LOCK_EX)
    try:
        turn = _locked(locks / "turn", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        if not exclusive:
            os.close(turnstile)  # closing the descriptor releases its lock
    try:
        yield
    finally:
        os.close(turn)
        if exclusive:
            os.close(turnstile)


@contextmanager
def sandbox_setup(state_dir: Path) -> Iterator[None]:
    """One shard at a time brings the sandbox up (`up` is idempotent, not concurrent)."""
    fd = _locked(Path(state_dir) / "test-locks" / "setup", fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)
