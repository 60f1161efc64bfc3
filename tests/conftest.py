"""The shared fixtures, registered once; each module says what it provides."""

pytest_plugins = [
    "tests.fixtures.database",
    "tests.fixtures.sandbox",
    "tests.fixtures.servers",
    "tests.fixtures.people",
    "tests.fixtures.clusters",
    "tests.fixtures.jobs",
    "tests.fixtures.browser",
    "tests.fixtures.run",
    "tests.fixtures.timeline",
    "tests.fixtures.chaos",
]
