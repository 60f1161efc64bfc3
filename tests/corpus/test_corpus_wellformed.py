"""Well-formedness of the corpus only: no parser is run here (see README.md)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from tests.corpus import loader

NAME = re.compile(r"^[a-z][a-z0-9_]*(/[a-z0-9][a-z0-9_]*)*$")
CASE_NAME = re.compile(r"^[a-z0-9][a-z0-9_]*$")
METRIC_KEYS = {
    "name",
    "source",
    "origin",
    "text",
    "expect",
    "units",
    "not_charted",
    "epoch_base",
    "notes",
}
FAILURE_KEYS = {
    "name",
    "file",
    "source",
    "slurm_state",
    "exit_code",
    "failure_class",
    "evidence",
    "rank",
    "node",
    "notes",
}

METRIC_CASES = loader.load_metric_cases()
FAILURE_CASES = loader.load_failure_cases()


def test_corpus_sizes() -> None:
    assert len(loader.metric_files()) >= 15
    assert len({c.name for c in METRIC_CASES}) >= 30
    assert len(FAILURE_CASES) >= 60


def test_metric_tables_have_known_keys_only() -> None:
    for path in loader.metric_files():
        for raw in loader.raw_metric_tables(path):
            assert set(raw) <= METRIC_KEYS, (path.name, raw.get("name"), set(raw) - METRIC_KEYS)
            expect = raw.get("expect", [])
            assert isinstance(expect, list)
            for point in expect:
                assert isinstance(point, dict)
                for key, value in point.items():
                    assert isinstance(value, int | float) and not isinstance(value, bool), (
                        path.name,
                        raw["name"],
                        key,
                    )


def test_metric_case_names_unique() -> None:
    counts = Counter(c.name for c in METRIC_CASES)
    assert [n for n, k in counts.items() if k > 1] == []


@pytest.mark.parametrize("case", METRIC_CASES, ids=lambda c: c.name)
def test_metric_case(case: loader.MetricCase) -> None:
    assert CASE_NAME.match(case.name)
    assert case.source.strip()
    assert case.origin in loader.ORIGINS
    if case.origin == "pasted-log":
        assert "http" in case.source, "a pasted log cites the thread it came from"
    if case.origin == "captured-run":
        assert re.search(r"\d+\.\d+", case.source), "a captured run names the versions it ran"
    assert case.text.strip()
    for point in case.expect:
        assert point, "an expectation point names at least one value"
        for key in point:
            assert NAME.match(key), key
        assert not set(point) & set(case.not_charted)
    for key in case.units:
        assert NAME.match(key), key
    for key in case.not_charted:
        assert NAME.match(key), key
    if case.epoch_base is not None:
        assert case.epoch_base in (0, 1)


def test_failure_case_names_unique() -> None:
    counts = Counter(c.name for c in FAILURE_CASES)
    assert [n for n, k in counts.items() if k > 1] == []
    files = Counter(c.file for c in FAILURE_CASES)
    assert [n for n, k in files.items() if k > 1] == []


def test_failure_tables_have_known_keys_only() -> None:
    for raw in loader.raw_failure_tables():
        assert set(raw) <= FAILURE_KEYS, (raw.get("name"), set(raw) - FAILURE_KEYS)


def test_every_log_file_is_listed() -> None:
    on_disk = {p.name for p in loader.FAILURES_DIR.glob("*.log")}
    assert on_disk == {c.file for c in FAILURE_CASES}


@pytest.mark.parametrize("case", FAILURE_CASES, ids=lambda c: c.name)
def test_failure_case(case: loader.FailureCase) -> None:
    assert CASE_NAME.match(case.name)
    assert case.source.strip()
    assert case.path.is_file(), case.file
    assert case.failure_class in loader.FAILURE_CLASSES
    assert case.slurm_state in loader.SLURM_STATES
    assert case.evidence.strip()
    log = case.log()
    assert case.evidence in log, "evidence is a substring of the log"
    assert "\n" not in case.evidence, "evidence lies on one line"
