"""`make run`'s embedded SQLite holds a few people at once (issue 33, point 5).

The real stack of a local run: daphne with `portal.settings.local` (DEBUG on) on a
SQLite file of its own. Before: of 20 submissions at once some were an HTTP 500
"database is locked", with Django's debug page as the body; a 30-digit id in a
query was an OverflowError (a 500). The first tests stop where the web's part ends
(the job, its first attempt and event recorded, its submission queued); the last
runs `make run`'s whole shape, a Celery worker with beat on the same file and the
sandbox cluster, and counts the Slurm jobs. Queued tasks are purged from this run's
Redis database afterwards.
"""

import dataclasses
import json
import re
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from devtools import servers
from devtools.servers import ROOT, Daphne, celery_worker, wait_until
from portal_lib.bounds import BIGINT_MAX
from tests.fixtures.sandbox import _slurm, cancel_jobs, run_jobs
from tests.helpers import run_tag, worker_tag

SUBMISSIONS = 20

# Run in the server's own settings: the demo people and project, a cluster whose
# partitions are cached (no SSH), alice's account on it, a submit token for her and a
# signed-in session of hers.
SETUP = """
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client
from django.core.cache import cache
from accounts.services import token_issue
from projects.services import demo_data_create
from tests import factories

demo_data_create(password="not-used-here-7")
alice = User.objects.get(username="alice")
cluster = factories.cluster("local")
factories.account(cluster, alice)
cache.set(f"clusters:partitions:{cluster.pk}", {"gpu": factories.GPU_PARTITION}, 3600)
print(token_issue(user=alice, name="sqlite test", scope="submit").text)
browser = Client()
browser.force_login(alice)
print(browser.cookies[settings.SESSION_COOKIE_NAME].value)
"""


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


# The sandbox recorded as `make run`'s `sandbox up` records it, with this worker's run
# directories (so that the suite's clean-up finds its jobs).
SANDBOX_SETUP = """
import json, os
from clusters.sandbox.cluster import SandboxInfo
from clusters.services import cluster_register_sandbox
info = SandboxInfo(**json.loads(open(os.environ["SANDBOX_INFO_FILE"]).read()))
cluster = cluster_register_sandbox(info=info)
cluster.base_run_dir = os.environ["SANDBOX_RUN_DIR"]
cluster.save(update_fields=["base_run_dir"])
"""


def _local_env(database: Path) -> dict[str, str]:
    return servers.server_env(
        database_url=f"sqlite:///{database}",
        redis_url=settings.REDIS_URL,
        tag=run_tag(),
        extra={
            "DJANGO_SETTINGS_MODULE": "portal.settings.local",
            "DJANGO_DEBUG": "true",
            # One person sends all 20; the per-person rate is tested in test_fair_use.py.
            "SUBMIT_RATE_LIMIT": "1000",
        },
    )


def _prepared(env: dict[str, str], setup: str = "") -> tuple[str, str]:
    """Migrate and seed the file: alice's submit token and session cookie."""
    _manage(env, "migrate", "--no-input", "-v", "0")
    token, session = _manage(env, "shell", "-c", SETUP + setup).strip().splitlines()[-2:]
    return token, session


@pytest.fixture
def sqlite_portal(tmp_path: Path) -> Iterator[tuple[str, str, str, Path]]:
    """A local run's web server on a fresh SQLite file: its URL, alice's submit token and
    session cookie, the file."""
    database = tmp_path / "db.sqlite3"
    env = _local_env(database)
    token, session = _prepared(env)
    try:
        with servers.running(Daphne(env, tmp_path)) as (daphne,):
            assert isinstance(daphne, Daphne)
            yield daphne.url, token, session, database
    finally:
        servers.purge_queue(env)


def _submit_together(
    url: str, token: str, *, cluster: str = "local", partition: str = "gpu"
) -> list[httpx.Response]:
    """SUBMISSIONS POSTs of a CPU job, sent at the same moment from as many threads."""
    start = threading.Barrier(SUBMISSIONS)
    responses: list[httpx.Response] = []
    lock = threading.Lock()

    def submit(number: int) -> None:
        body = {
            "project": "vision",
            "cluster": cluster,
            "name": f"together-{number:02d}",
            "command": "sleep 600",
            "partition": partition,
            "nodes": 1,
            "gpus_per_node": 0,
            "cpus_per_task": 1,
            "time_limit": "00:10:00",
        }
        with httpx.Client(base_url=url, timeout=60) as client:
            start.wait()
            response = client.post(
                "/api/v1/jobs/", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            response.read()
        with lock:
            responses.append(response)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(SUBMISSIONS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return responses


def test_twenty_submissions_at_once_each_make_one_job(
    sqlite_portal: tuple[str, str, str, Path],
) -> None:
    url, token, _, database = sqlite_portal
    responses = _submit_together(url, token)
    assert len(responses) == SUBMISSIONS  # all answered
    failed = [(r.status_code, r.text[:300]) for r in responses if r.status_code != 201]
    assert failed == []
    ids = sorted(r.json()["id"] for r in responses)
    assert len(set(ids)) == SUBMISSIONS
    with sqlite3.connect(database) as db:
        jobs = db.execute("SELECT id, name FROM jobs_job ORDER BY id").fetchall()
        attempts = db.execute("SELECT job_id, number, state FROM jobs_attempt").fetchall()
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
    assert [pk for pk, _ in jobs] == ids
    assert sorted(name for _, name in jobs) == [f"together-{n:02d}" for n in range(SUBMISSIONS)]
    # Exactly one attempt each, queued for its one submission.
    assert sorted((job, number, state) for job, number, state in attempts) == [
        (pk, 1, "QUEUED") for pk in ids
    ]
    assert mode == "wal"


def test_errors_are_json_for_the_api_and_ids_past_a_column_a_400(
    sqlite_portal: tuple[str, str, str, Path],
) -> None:
    url, token, session, _ = sqlite_portal
    auth = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, timeout=30) as client:
        missing = client.get("/api/v1/no-such-endpoint/", headers=auth)
        job = client.get(f"/api/v1/jobs/{'9' * 30}/", headers=auth)
        client.cookies.set(settings.SESSION_COOKIE_NAME, session)
        states = client.get("/jobs/states/", params={"ids": "9" * 30})
        compare = client.get("/projects/vision/compare/", params={"runs": "9" * 26})
    # Django's technical 404 page (every route of the portal) before.
    assert missing.status_code == 404
    assert missing.headers["Content-Type"] == "application/json"
    assert missing.json() == {"detail": "Not Found."}
    assert job.status_code == 404 and job.headers["Content-Type"] == "application/json"
    # SQLite's OverflowError (a 500, the debug page) before; the 400 naming the range now.
    assert states.status_code == 400
    assert states.json()["ids"] == [f"Ids are whole numbers up to {BIGINT_MAX}."]
    assert compare.status_code == 400 and "runs: 999" in compare.text


def _attempts(database: Path) -> list[tuple[str, str, str]]:
    """(Slurm job name, Slurm job id, state) of every attempt in the file."""
    with sqlite3.connect(database, timeout=30) as db:
        rows = db.execute("SELECT uuid, slurm_job_id, state FROM jobs_attempt").fetchall()
    return [(f"portal-{uuid.UUID(str(u))}", job_id, state) for u, job_id, state in rows]


@pytest.mark.sandbox
@pytest.mark.timeout(600)
def test_twenty_submissions_at_once_reach_slurm_once_each(tmp_path: Path, sandbox_info) -> None:
    """`make run`'s shape: daphne, a Celery worker with beat and the sandbox on one SQLite
    file. All 20 are answered 201, and each attempt is exactly one Slurm job."""
    state_dir = settings.SANDBOX_STATE_DIR
    database = tmp_path / "db.sqlite3"
    info_file = tmp_path / "sandbox.json"
    info_file.write_text(json.dumps(dataclasses.asdict(sandbox_info)))
    info_file.chmod(0o600)
    env = {
        **_local_env(database),
        "SANDBOX_INFO_FILE": str(info_file),
        "SANDBOX_RUN_DIR": f"{sandbox_info.base_run_dir.rstrip('/')}/{worker_tag()}",
    }
    token, _ = _prepared(env, SANDBOX_SETUP)
    worker = celery_worker(env, tmp_path, name=f"sqlite-{worker_tag()}", concurrency=4)
    try:
        with servers.running(Daphne(env, tmp_path), worker) as (daphne, _):
            assert isinstance(daphne, Daphne)
            responses = _submit_together(
                daphne.url, token, cluster="sandbox", partition=sandbox_info.partition
            )
            assert len(responses) == SUBMISSIONS
            assert [(r.status_code, r.text[:300]) for r in responses if r.status_code != 201] == []
            wait_until(
                lambda: all(job_id for _, job_id, _ in _attempts(database)),
                240,
                "every attempt's Slurm job id",
            )
        attempts = _attempts(database)
        assert len(attempts) == SUBMISSIONS
        # Every job Slurm holds or held by an attempt's name: exactly one each, the one
        # the attempt records (a retried sbatch would show as a second).
        listed = _slurm(
            state_dir, "squeue", "--noheader", "--states=all", "-O", "JobID:30,Name:200"
        )
        assert listed.returncode == 0, listed.stderr
        by_name: dict[str, list[str]] = {}
        for line in listed.stdout.splitlines():
            job_id, _, name = line.strip().partition(" ")
            name = name.strip()
            by_name.setdefault(name, []).append(job_id)
        assert {name: by_name.get(name) for name, _, _ in attempts} == {
            name: [job_id] for name, job_id, _ in attempts
        }
    finally:
        ids = {job_id for _, job_id, _ in _attempts(database) if job_id}
        ids |= {line.split()[0] for line in run_jobs(state_dir, worker_tag())}
        cancel_jobs(state_dir, sorted(ids))
        servers.purge_queue(env)


def test_the_submit_forms_preview_works_on_sqlite(
    sqlite_portal: tuple[str, str, str, Path],
) -> None:
    """The local run's database has no regular-expression functions: the preview (its
    sizing from past runs among them) must not need them."""
    url, _, session, _ = sqlite_portal
    with httpx.Client(base_url=url, timeout=30) as client:
        client.cookies.set(settings.SESSION_COOKIE_NAME, session)
        form = client.get("/jobs/new/")
        assert form.status_code == 200
        csrf = client.cookies[settings.CSRF_COOKIE_NAME]
        fields = {
            "project": re.search(r'<option value="(\d+)"[^>]*>\s*vision', form.text)[1],  # type: ignore[index]
            "cluster": "local",
            "partition": "gpu",
            "name": "preview",
            "template": "command",
            "command": "python train.py --steps 10",
            "nodes": "1",
            "gpus_per_node": "1",
            "cpus_per_task": "1",
            "time_limit": "0:30:00",
            "max_restarts": "0",
        }
        preview = client.post("/jobs/new/preview/", data=fields, headers={"X-CSRFToken": csrf})
    assert preview.status_code == 200, preview.text[:2000]
    answer = preview.json()
    assert answer["errors"] == {} and "#SBATCH" in answer["script"]
    assert answer["sizing"] is not None
