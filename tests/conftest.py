"""The suite's harness and the shared fixtures, registered once; each module says what it does."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.sandbox",
    "tests.fixtures.servers",
    "tests.fixtures.people",
    "tests.fixtures.clusters",
    "tests.fixtures.jobs",
    "tests.fixtures.browser",
    "tests.fixtures.sso",
    # The run as a whole: its tag, the order tests start in, `--fast`, the recorded
    # durations, and the check at the end that nothing the run started is left. After
    # the fixtures it imports, so that pytest rewrites their asserts.
    "tests.harness",
    "tests.fixtures.timeline",
    "tests.fixtures.chaos",
]
