"""Every real failure log of tests/corpus/failures gets the class, evidence and rank it
should (tests/corpus/README.md, "How a runner compares"); the totals are the runner's."""

import pytest

from tests.corpus.failures_runner import class_totals, report, run_failures
from tests.corpus.loader import load_failure_cases

CASES = load_failure_cases()


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_each_failure_case_is_diagnosed_as_expected(case) -> None:
    (result,) = run_failures([case])
    assert result.passed, result.problems


def test_the_runner_reports_every_class_with_totals() -> None:
    results = run_failures()
    totals = class_totals(results)
    assert sum(total for _, total in totals.values()) == len(CASES)
    assert {"gpu_hardware", "none", "unknown", "nccl_timeout"} <= set(totals)
    text = report(results)
    assert text.splitlines()[-1].split("|")[-1].strip() == str(len(CASES))
