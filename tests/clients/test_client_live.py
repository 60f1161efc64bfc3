"""The client against a live portal: daphne, a Celery worker and the sandbox Slurm cluster.

One short job (a shell loop printing `step N, loss=X`) and a long one beside
it: follow the short one's log to its end over the SSE stream, fetch its loss
series, and cancel the long one once Slurm holds it. The DDP example runs in
the notebook test (test_notebook.py), through this same client.
"""

import time

import httpx
import pytest
from portal_client import Portal

from accounts.services import token_issue
from clusters.sandbox.config import GPUS_PER_NODE, NODES
from web.live.streams import OPEN_STREAMS_PER_USER

pytestmark = pytest.mark.sandbox

STEPS = 6
TRAIN = (
    f"for i in $(seq 1 {STEPS}); do "
    'echo "step $i, loss=$(awk -v i=$i \'BEGIN { printf "%.3f", 1 / i }\')"; sleep 0.3; '
    "done"
)


def test_client_submits_follows_reads_loss_and_cancels(
    celery_worker, asgi_server: str, researcher, sandbox_cluster
) -> None:
    token = token_issue(user=researcher, name="live test", scope="submit").text
    with Portal(asgi_server, token) as portal:
        # Every node's stand-in GPUs, read from Slurm.
        [cluster] = [c for c in portal.clusters() if c["name"] == sandbox_cluster.name]
        gpus = len(NODES) * GPUS_PER_NODE
        assert cluster["gpus_total"] == gpus and cluster["partitions"], cluster
        job = portal.submit(
            project="vision",
            cluster=sandbox_cluster.name,
            name="client short",
            command=TRAIN,
            gpus_per_node=1,
            cpus_per_task=1,
            time_limit=600,
            total_steps=STEPS,
        )
        other = portal.submit(
            project="vision",
            cluster=sandbox_cluster.name,
            name="to cancel",
            command="sleep 300",
            gpus_per_node=1,
            cpus_per_task=1,
            time_limit=600,
        )

        log = "".join(job.logs(follow=True))
        assert log.splitlines() == [f"step {i}, loss={1 / i:.3f}" for i in range(1, STEPS + 1)]

        assert job.wait(timeout=60, progress=False).state == "COMPLETED", job.events()
        loss = job.metrics("loss")
        assert list(loss["step"]) == [float(step) for step in range(1, STEPS + 1)]
        assert list(loss["loss"]) == [round(1 / i, 3) for i in range(1, STEPS + 1)]

        deadline = time.monotonic() + 60
        while other.refresh().state not in ("PENDING", "RUNNING") and not other.is_finished:
            assert time.monotonic() < deadline, other.events()
            time.sleep(0.5)
        # A client that leaves mid-stream gives its slot back: more streams than the
        # per-user bound, one after the other, all open.
        for _ in range(OPEN_STREAMS_PER_USER + 2):
            assert _first_event_of_a_left_stream(portal, other.id) == "state"
        other.cancel()
        assert other.wait(timeout=60, progress=False).state == "CANCELLED", other.events()
        assert other.attempts()[-1]["cancel_requested_at"] is not None


def _first_event_of_a_left_stream(portal: Portal, job_id: int) -> str:
    """Open the job's log stream, read one event and hang up."""
    for _ in range(50):
        # Its own read timeout: a stream that sends nothing fails the test, not the run.
        with portal.http.stream(
            "GET", f"jobs/{job_id}/attempts/1/log/stream", timeout=httpx.Timeout(30.0)
        ) as response:
            if response.status_code == 429:
                time.sleep(0.1)  # the server has not yet seen an earlier hang-up
                continue
            assert response.status_code == 200
            for line in response.iter_lines():
                if line.startswith("event: "):
                    return line.removeprefix("event: ")
    pytest.fail("a stream's slot never came back after its client left")
