"""PostgreSQL stopped at once (`pg_ctl -m immediate stop`: every backend killed, as in a
crash) and started again while jobs run.

The database is a PostgreSQL cluster of the test's own (initdb in a temporary
directory, a free port), holding a copy of the test database with the test's rows;
the test itself and the servers it starts use it, never the one the suite shares.
"""

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from django.db import connection
from django.utils import timezone

from devtools import servers
from tests.chaos.harness import (
    assert_all_intact,
    returned,
    seconds_to_recover,
    stop,
    submit,
    wait_running,
)
from tests.chaos.processes import SupervisedWorker
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag
from tests.throwaway import ThrowawayPostgres

pytestmark = pytest.mark.sandbox

OUTAGE = 5.0
DATABASE = "portal_chaos"


@pytest.fixture
def private_postgres(researcher) -> Iterator[ThrowawayPostgres]:
    """This test's database moved to a PostgreSQL of its own, rows and all, until it ends."""
    if connection.vendor != "postgresql":
        pytest.skip("the test database is not PostgreSQL")
    db = connection.settings_dict
    saved = {key: db[key] for key in ("HOST", "PORT", "NAME")}
    password = f":{quote(db['PASSWORD'], safe='')}" if db.get("PASSWORD") else ""
    source = (
        f"postgres://{db['USER'] or 'postgres'}{password}@{db['HOST'] or '127.0.0.1'}"
        f":{db['PORT'] or 5432}/{db['NAME']}"
    )
    # Not under pytest's tmp_path: the postgres user must reach it.
    directory = Path(tempfile.mkdtemp(prefix=f"portal-chaos-pg-{worker_tag()}-"))
    server = ThrowawayPostgres(directory)
    try:
        server.copy_from(source, DATABASE)
        connection.close()
        db.update(HOST="127.0.0.1", PORT=str(server.port), NAME=DATABASE)
        yield server
    finally:
        connection.close()
        db.update(saved)
        server.remove()


def test_postgres_stopped_at_once_and_started_again_while_jobs_run_loses_nothing(
    researcher, project, sandbox_cluster, sandbox_info, private_postgres, chaos_report, tmp_path
) -> None:
    since = timezone.now()
    worker = SupervisedWorker(live_env(), tmp_path, name=f"chaos-pg-{worker_tag()}")
    servers.purge_queue(worker.env)
    with servers.running(worker):
        jobs = [submit(researcher, project, sandbox_cluster, f"steady {n}") for n in range(2)]
        running = [a.pk for a in wait_running(jobs)]
        restarts = worker.restarts()
        private_postgres.stop_immediately()
        time.sleep(OUTAGE)
        private_postgres.start()
        seconds = seconds_to_recover(running, returned(running), "PostgreSQL came back")
        after = worker.restarts() - restarts
        chaos_report(
            "postgres-immediate-stop",
            seconds,
            f"down {OUTAGE:.0f} s; the worker "
            + (f"exited and was restarted {after} times" if after else "survived"),
        )
        stop(jobs)
        assert_all_intact(jobs, since=since, accounting=sandbox_info.accounting)
