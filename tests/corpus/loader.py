"""Load the framework-output corpus (tests/corpus/metrics) and the failure corpus
(tests/corpus/failures) into dataclasses. Stdlib only; no parser is called here.

See tests/corpus/README.md for the conventions the expectations follow.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
METRICS_DIR = CORPUS / "metrics"
FAILURES_DIR = CORPUS / "failures"
FAILURE_CASES = FAILURES_DIR / "cases.toml"

ORIGINS = frozenset({"format-string", "pasted-log", "captured-run"})
FAILURE_CLASSES = frozenset(
    {
        "nccl_timeout",
        "cuda_oom",
        "host_oom",
        "node_failure",
        "time_limit",
        "preemption",
        "address_in_use",
        "missing_module",
        "missing_file",
        "rank_crash",
        "gpu_hardware",
        "device_assert",
        "diverged",
        "cancelled",
        "unknown",
        "none",
    }
)
SLURM_STATES = frozenset(
    {
        "FAILED",
        "TIMEOUT",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "CANCELLED",
        "PREEMPTED",
        "COMPLETED",
    }
)

Value = float | int
Point = dict[str, Value]


@dataclass(frozen=True)
class MetricCase:
    """One sample of a framework's stdout and the points a researcher expects from it."""

    name: str
    source: str
    origin: str
    text: str
    expect: list[Point]
    framework: str = ""
    units: dict[str, str] = field(default_factory=dict)
    not_charted: list[str] = field(default_factory=list)
    epoch_base: int | None = None
    notes: str = ""
    file: Path | None = None


@dataclass(frozen=True)
class FailureCase:
    """One real failure log (or a no-false-alarm log) and the diagnosis it should get."""

    name: str
    file: str
    source: str
    slurm_state: str
    exit_code: int
    failure_class: str
    evidence: str
    rank: int | None = None
    node: str = ""
    notes: str = ""

    @property
    def path(self) -> Path:
        return FAILURES_DIR / self.file

    def log(self) -> str:
        return self.path.read_text(encoding="utf-8")


def _metric_case(raw: dict[str, object], framework: str, file: Path) -> MetricCase:
    expect_raw = raw.get("expect", [])
    if not isinstance(expect_raw, list):
        raise TypeError(f"{file}: case {raw.get('name')!r}: expect must be an array of tables")
    expect: list[Point] = []
    for point in expect_raw:
        if not isinstance(point, dict):
            raise TypeError(f"{file}: case {raw.get('name')!r}: each expect must be a table")
        expect.append(
            {str(k): v for k, v in point.items() if isinstance(v, int | float)},
        )
    units = raw.get("units", {})
    not_charted = raw.get("not_charted", [])
    epoch_base = raw.get("epoch_base")
    return MetricCase(
        name=str(raw["name"]),
        source=str(raw["source"]),
        origin=str(raw["origin"]),
        text=str(raw["text"]),
        expect=expect,
        framework=framework,
        units={str(k): str(v) for k, v in units.items()} if isinstance(units, dict) else {},
        not_charted=[str(n) for n in not_charted] if isinstance(not_charted, list) else [],
        epoch_base=epoch_base if isinstance(epoch_base, int) else None,
        notes=str(raw.get("notes", "")),
        file=file,
    )


def raw_metric_tables(path: Path) -> list[dict[str, object]]:
    with path.open("rb") as handle:
        data = tomllib.load(handle)
    cases = data.get("case", [])
    if not isinstance(cases, list):
        raise TypeError(f"{path}: [[case]] must be an array of tables")
    return cases


def metric_files() -> list[Path]:
    return sorted(METRICS_DIR.glob("*.toml"))


def load_metric_cases() -> list[MetricCase]:
    cases: list[MetricCase] = []
    for path in metric_files():
        cases.extend(_metric_case(raw, path.stem, path) for raw in raw_metric_tables(path))
    return cases


def raw_failure_tables() -> list[dict[str, object]]:
    with FAILURE_CASES.open("rb") as handle:
        data = tomllib.load(handle)
    cases = data.get("case", [])
    if not isinstance(cases, list):
        raise TypeError(f"{FAILURE_CASES}: [[case]] must be an array of tables")
    return cases


def load_failure_cases() -> list[FailureCase]:
    cases: list[FailureCase] = []
    for raw in raw_failure_tables():
        rank = raw.get("rank")
        exit_code = raw["exit_code"]
        if not isinstance(exit_code, int):
            raise TypeError(f"failure case {raw.get('name')!r}: exit_code must be an integer")
        cases.append(
            FailureCase(
                name=str(raw["name"]),
                file=str(raw["file"]),
                source=str(raw["source"]),
                slurm_state=str(raw["slurm_state"]),
                exit_code=exit_code,
                failure_class=str(raw["failure_class"]),
                evidence=str(raw["evidence"]),
                rank=rank if isinstance(rank, int) else None,
                node=str(raw.get("node", "")),
                notes=str(raw.get("notes", "")),
            )
        )
    return cases
