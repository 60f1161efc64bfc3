"""Diagnose every failure log of the corpus and print per case and per class what came out.

`python -m tests.corpus.failures_runner` (portal.settings.test; no database is used).
A case passes when the class equals `failure_class`, the evidence shown contains
`evidence`, and the rank equals `rank` where the case gives one; a `none` case
passes when the diagnosis raises no alarm. See tests/corpus/README.md.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from tests.corpus.loader import FailureCase, load_failure_cases


@dataclass(frozen=True)
class FailureResult:
    case: FailureCase
    failure_class: str  # "none" when no alarm
    evidence: str
    rank: int | None

    @property
    def problems(self) -> list[str]:
        case = self.case
        found: list[str] = []
        if self.failure_class != case.failure_class:
            found.append(f"class {self.failure_class!r}, expected {case.failure_class!r}")
        if case.failure_class != "none" and case.evidence not in self.evidence:
            found.append(f"evidence {self.evidence!r} lacks {case.evidence!r}")
        if case.rank is not None and self.rank != case.rank:
            found.append(f"rank {self.rank}, expected {case.rank}")
        return found

    @property
    def passed(self) -> bool:
        return not self.problems


def run_failures(cases: list[FailureCase] | None = None) -> list[FailureResult]:
    """Each case through the diagnosis as the portal calls it after an attempt ends."""
    # Imported here: the diagnosis needs Django's settings, the loader does not.
    from monitoring.diagnosis.diagnose import diagnose

    results = []
    for case in cases if cases is not None else load_failure_cases():
        found = diagnose(state=case.slurm_state, exit_code=case.exit_code, log_tail=case.log())
        results.append(
            FailureResult(
                case=case,
                failure_class=found.failure_class if found else "none",
                evidence=found.evidence if found else "",
                rank=found.rank if found else None,
            )
        )
    return results


def class_totals(results: list[FailureResult]) -> dict[str, tuple[int, int]]:
    """Per expected class: (passed, total)."""
    total = Counter(r.case.failure_class for r in results)
    passed = Counter(r.case.failure_class for r in results if r.passed)
    return {name: (passed[name], total[name]) for name in sorted(total)}


def report(results: list[FailureResult]) -> str:
    lines = []
    for result in results:
        mark = "ok  " if result.passed else "FAIL"
        lines.append(f"{mark} {result.case.name}: {result.failure_class}")
        lines.extend(f"       {problem}" for problem in result.problems)
    lines.append("")
    lines.append(f"{'class':<16} | passed | cases")
    lines.append("-" * 34)
    for name, (passed, total) in class_totals(results).items():
        lines.append(f"{name:<16} | {passed:>6} | {total:>5}")
    passed_all = sum(r.passed for r in results)
    lines.append("-" * 34)
    lines.append(f"{'total':<16} | {passed_all:>6} | {len(results):>5}")
    return "\n".join(lines)


def main() -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings.test")
    import django

    django.setup()
    results = run_failures()
    print(report(results))
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
