"""A real Prometheus (Debian's) scrapes the live portal's /metrics while a sandbox job runs.

PromQL returns the job's GPU utilisation with its job label; a scrape without the
token is refused; once the job ends its series leave /metrics; every query of the
Grafana board is valid PromQL to this Prometheus.
"""

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from devtools.servers import TAG_VARIABLE, free_port
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.services import job_cancel, job_submit
from tests.board import board_exprs, concrete, load_board
from tests.factories import spec
from tests.helpers import METRICS_TOKEN, QUEUE_WAIT, metric_samples, run_tag, wait_for

pytestmark = pytest.mark.sandbox

# Busy half the time: the stand-in nvidia-smi reads it as a used GPU (see test_idle_gpus).
WORKER = (
    "python3 -c 'import time\n"
    "while True:\n"
    "    end = time.time() + 0.5\n"
    "    while time.time() < end: pass\n"
    "    time.sleep(0.3)'"
)


def _config(target: str, token_file: Path) -> str:
    """deploy/prometheus/prometheus.yml's scrape, every second, of the live server."""
    scrape = {
        "job_name": "portal",
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "metrics_path": "/metrics",
        # As in deploy/: the per-job series keep their own `job` label.
        "honor_labels": True,
        "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
        "static_configs": [{"targets": [target]}],
    }
    config = {"global": {"scrape_interval": "1s"}, "scrape_configs": [scrape]}
    return json.dumps(config)  # JSON is YAML


@pytest.fixture
def prometheus(asgi_server: str, tmp_path: Path) -> Iterator[str]:
    """Prometheus scraping the live portal every second; its URL. Stopped when the test ends."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("Debian's prometheus is not installed (make test installs it as root)")
    token_file = tmp_path / "metrics-token"
    token_file.write_text(METRICS_TOKEN)
    token_file.chmod(0o600)
    config = tmp_path / "prometheus.yml"
    config.write_text(_config(urlsplit(asgi_server).netloc, token_file))
    port = free_port()
    log = (tmp_path / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, TAG_VARIABLE: run_tag()},  # the end-of-run check looks for it
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:

        def ready() -> bool:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 60, "Prometheus to be ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=20)
        log.close()


def query(url: str, promql: str) -> dict[str, Any]:
    reply = httpx.get(f"{url}/api/v1/query", params={"query": promql}, timeout=10)
    body: dict[str, Any] = reply.json()
    assert body["status"] == "success", (promql, body)
    return body["data"]


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def test_prometheus_scrapes_a_running_jobs_gpu_and_its_series_leave_when_it_ends(
    celery_worker, asgi_server, prometheus, researcher, project, sandbox_cluster
) -> None:
    scrape = httpx.get(f"{asgi_server}/metrics", timeout=10)
    assert scrape.status_code == 401
    assert "portal_" not in scrape.text
    wrong = {"Authorization": "Bearer not-the-token"}
    assert httpx.get(f"{asgi_server}/metrics", headers=wrong, timeout=10).status_code == 403

    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            command=WORKER, gpus_per_node=1, time_limit=timedelta(minutes=10), name="scraped"
        ),
    )
    selector = f'portal_job_gpu_utilization_ratio{{job="{job.pk}"}}'
    found: list[dict[str, Any]] = []

    def in_prometheus() -> bool:
        found[:] = query(prometheus, selector)["result"]
        return bool(found)

    try:
        wait_for(in_prometheus, QUEUE_WAIT, "the job's GPU utilisation in Prometheus")
        attempt = _attempt(job)
        [series] = found
        labels = series["metric"]
        assert labels["job"] == str(job.pk)
        assert labels["user"] == researcher.username
        assert labels["project"] == project.slug
        assert labels["cluster"] == sandbox_cluster.name
        assert labels["node"] == attempt.node_list
        assert 0.0 <= float(series["value"][1]) <= 1.0
        # The scrape itself: Prometheus's own view of the target, with the token.
        [up] = query(prometheus, 'up{job="portal"}')["result"]
        assert up["value"][1] == "1"
        # Every query of the Grafana board parses and runs in this Prometheus.
        for expr in board_exprs(load_board()):
            query(prometheus, concrete(expr, job=str(job.pk), cluster=sandbox_cluster.name))
    finally:
        job_cancel(job=job, user=researcher)
        wait_for(lambda: _attempt(job).is_finished, 120, "the job to end")
    assert _attempt(job).state == State.CANCELLED

    headers = {"Authorization": f"Bearer {METRICS_TOKEN}"}
    answer = httpx.get(f"{asgi_server}/metrics", headers=headers, timeout=10)
    assert answer.status_code == 200
    samples = metric_samples(answer.text)
    assert [s for s in samples if s[0] == "portal_cluster_pending_jobs"]
    assert not [s for s in samples if s[1].get("job") == str(job.pk)]
