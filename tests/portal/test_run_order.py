"""The order the suite's tests start in (tests/harness.py), on stand-in items."""

from types import SimpleNamespace

from tests import harness as run

RESUME = "tests/e2e/test_resume_node_failure.py::test_a_failed_node_is_excluded_and_the_job_resumes_on_the_other"
ACCOUNTING = "tests/e2e/test_accounting.py::test_connection_check_and_quota_mirror_on_the_sandbox"
LEASE = (
    "tests/jobs/test_poll_lease.py::test_a_worker_killed_mid_poll_loses_the_lease_within_seconds"
)


class Item:
    def __init__(self, nodeid: str, *fixtures: str, exclusive: bool = False) -> None:
        self.nodeid = nodeid
        self.fixturenames = list(fixtures)
        self.exclusive = exclusive

    def get_closest_marker(self, name: str) -> object:
        return object() if name == "sandbox_exclusive" and self.exclusive else None


def test_each_exclusive_test_is_followed_by_the_other_workers_plain_work(monkeypatch) -> None:
    # The seconds a run recorded (tests/durations.json), as the order reads them.
    times = {RESUME: 49.0, ACCOUNTING: 5.0, LEASE: 45.0}
    monkeypatch.setattr(run, "recorded_seconds", lambda: times)
    exclusive = [Item(ACCOUNTING, "sandbox_info", exclusive=True)]
    exclusive.append(Item(RESUME, "sandbox_info", exclusive=True))
    shared = [Item(f"tests/e2e/test_s.py::test_{i}", "sandbox_info") for i in range(5)]
    plain = [Item(f"tests/jobs/test_p.py::test_{i}") for i in range(2000)]
    long_plain = Item(LEASE)
    items = [*shared, *exclusive, *plain[:1000], long_plain, *plain[1000:]]
    config = SimpleNamespace(workerinput={"workercount": 4}, option=SimpleNamespace(fast=False))

    run.pytest_collection_modifyitems(config, items)  # type: ignore[arg-type]

    assert sorted(i.nodeid for i in items) == sorted(
        i.nodeid for i in [*shared, *exclusive, *plain, long_plain]
    )
    first, second = (items.index(item) for item in (exclusive[1], exclusive[0]))
    assert first == 0  # the longest exclusive test first
    # Three other workers' worth of plain work beside each: 49 s x 3 at 0.1 s a test.
    assert second - first - 1 >= 49 * 3 / run.SHORT_TEST_SECONDS
    assert all(not item.fixturenames for item in items[first + 1 : second])
    # Then 5 s x 3, the short tests before the long one; the sandbox's shared tests after.
    beside_second = items[second + 1 : second + 1 + int(5 * 3 / run.SHORT_TEST_SECONDS)]
    assert all(not item.fixturenames and item is not long_plain for item in beside_second)
    assert max(items.index(item) for item in beside_second) < min(map(items.index, shared))


def test_the_order_reads_the_recorded_durations() -> None:
    # The record the suite runs by names tests that exist, with their seconds.
    times = run.recorded_seconds()
    assert times and all(seconds > 0 for seconds in times.values())
    assert all("::" in nodeid and nodeid.startswith("tests/") for nodeid in times)
