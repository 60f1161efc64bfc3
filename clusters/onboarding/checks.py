"""One readiness check's verdict: what ran, what it found, and what to fix when it failed."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Check:
    """A check that ran: `detail` says what it found, `fix` what to change when it failed."""

    name: str
    passed: bool
    detail: str
    fix: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "passed": self.passed, "detail": self.detail, "fix": self.fix}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Check":
        return cls(
            name=str(data["name"]),
            passed=bool(data["passed"]),
            detail=str(data.get("detail", "")),
            fix=str(data.get("fix", "")),
        )

    def line(self) -> str:
        """The check as the command prints it: verdict, name, finding, then the fix."""
        verdict = "passed" if self.passed else "FAILED"
        text = f"[{verdict}] {self.name}: {self.detail}"
        return f"{text}\n         To fix: {self.fix}" if self.fix and not self.passed else text


def passed(name: str, detail: str) -> Check:
    return Check(name=name, passed=True, detail=detail)


def failed(name: str, detail: str, fix: str) -> Check:
    return Check(name=name, passed=False, detail=detail, fix=fix)


def summary(checks: list[Check]) -> str:
    """One sentence: all passed, or which failed."""
    bad = [check.name for check in checks if not check.passed]
    if not bad:
        return f"All {len(checks)} checks passed: the cluster is ready for jobs."
    failing = ", ".join(bad)
    return f"{len(bad)} of {len(checks)} checks failed ({failing}): fix them, then check again."
