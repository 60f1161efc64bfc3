"""Every benchmark runs at small sizes (`--quick`) in the suite, so that none can rot unnoticed.

What they measure is not asserted here (timings live in bench/); that each runs to
its end and prints its table is. They run on this worker's test database, which
the transactional test flushes afterwards, and its Redis database.
"""

import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db import connection

from tests.fixtures.browser import CHROMIUM
from tests.helpers import ROOT

BENCH = ROOT / "bench"
ON_THE_SANDBOX = (
    "agent_poll.py",
    "hang.py",
    "latency.py",
    "poll.py",
    "session_proxy.py",
    "soak.py",
    "start_estimates.py",
)
DATABASE_ONLY = (
    "compare.py",
    "goodput.py",
    "hostile.py",
    "ingest.py",
    "joblist.py",
    "metrics.py",
    "queue_waits.py",
    "runs.py",
    "series.py",
    "web_connections.py",  # its daphnes on the database
)
PURE = ("bad_nodes.py", "diagnosis.py", "heartbeat.py", "parsers.py")
IN_CHROMIUM = ("page.py",)  # daphne and Debian's Chromium on the database, no cluster


def _run_quick(name: str) -> str:
    db = connection.settings_dict
    user, host, port = db["USER"] or "postgres", db["HOST"] or "127.0.0.1", db["PORT"] or 5432
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{user}@{host}:{port}/{db['NAME']}",
        "REDIS_URL": settings.REDIS_URL,
        "SANDBOX_STATE_DIR": str(settings.SANDBOX_STATE_DIR),
    }
    done = subprocess.run(
        [sys.executable, str(BENCH / name), "--quick"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"{name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def test_every_bench_is_run_here() -> None:
    benches = {path.name for path in BENCH.glob("*.py")} - {"benchdb.py"}
    assert benches == {*ON_THE_SANDBOX, *DATABASE_ONLY, *PURE, *IN_CHROMIUM}


@pytest.mark.parametrize("name", DATABASE_ONLY)
def test_bench_runs_quick(name: str, transactional_db: None) -> None:
    assert "|" in _run_quick(name)  # its table


@pytest.mark.browser
@pytest.mark.parametrize("name", IN_CHROMIUM)
def test_browser_bench_runs_quick(name: str, transactional_db: None) -> None:
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed (make test installs it as root)")
    out = _run_quick(name)
    assert "partial (ours)" in out and "full bundle" in out  # both, in one run
    if name == "page.py":  # the compare page beside the job page, ours beside every point
        assert "downsampled (ours)" in out and "every point" in out


@pytest.mark.parametrize("name", PURE)
def test_pure_bench_runs_quick(name: str) -> None:
    assert "|" in _run_quick(name)  # its table


@pytest.mark.sandbox
@pytest.mark.parametrize("name", ON_THE_SANDBOX)
def test_sandbox_bench_runs_quick(name: str, transactional_db: None, sandbox_info) -> None:
    assert "|" in _run_quick(name)
