"""Captured Slurm output and results for the adapter's tests."""

from datetime import UTC, datetime
from pathlib import Path

from clusters.ssh import CommandResult

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def result(exit_status: int = 0, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(exit_status, stdout.encode(), stderr.encode())


def at(hour: int, minute: int, second: int, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, second, tzinfo=UTC)


def by_id(rows: list) -> dict:
    return {row.job_id: row for row in rows}
