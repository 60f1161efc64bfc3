"""Captured Slurm output and results for the adapter's tests."""

from datetime import UTC, datetime
from pathlib import Path

from clusters.ssh import CommandResult

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"

# The formats of the fixtures captured before squeue and sacct were asked for the user and
# submit time (fixtures/slurm/README.md); parse_squeue/parse_sacct take them as `fields`.
SQUEUE_FIELDS_2026_12_01 = (
    "JobArrayID",
    "State",
    "Reason",
    "NodeList",
    "StartTime",
    "EndTime",
    "TimeLimit",
    "exit_code",
    "NumNodes",
    "Comment",
    "Name",
)
SACCT_FIELDS_2026_12_01 = (
    "JobID",
    "State",
    "ExitCode",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "NNodes",
    "NodeList",
    "AllocTRES",
    "Comment",
    "JobName",
)


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def result(exit_status: int = 0, stdout: str = "", stderr: str = "") -> CommandResult:
    return CommandResult(exit_status, stdout.encode(), stderr.encode())


def at(hour: int, minute: int, second: int, day: int = 1) -> datetime:
    return datetime(2026, 12, day, hour, minute, second, tzinfo=UTC)


def by_id(rows: list) -> dict:
    return {row.job_id: row for row in rows}
