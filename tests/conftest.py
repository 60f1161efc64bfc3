"""The suite's harness and the shared fixtures, registered once; each module says what it does."""

pytest_plugins = [
    # The run as a whole: its tag, the order tests start in, `--fast`, the recorded
    # durations, and the check at the end that nothing the run started is left.
    "tests.harness",
    "tests.fixtures.database",
    "tests.fixtures.sandbox",
    "tests.fixtures.servers",
    "tests.fixtures.people",
    "tests.fixtures.clusters",
    "tests.fixtures.jobs",
    "tests.fixtures.browser",
    "tests.fixtures.timeline",
    "tests.fixtures.chaos",
]
