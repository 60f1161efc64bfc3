"""Every metric case of the corpus reads as tests/corpus/README.md expects (the runner's rules)."""

import pytest

from tests.corpus.loader import MetricCase, load_metric_cases
from tests.corpus.runner import compare

CASES = load_metric_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_metric_case_reads_as_expected(case: MetricCase) -> None:
    result = compare(case)
    assert result.passed, "\n".join([case.source, *result.problems])
