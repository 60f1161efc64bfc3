"""Live data of real jobs: every log byte, metric point and GPU sample reaches the database."""

import shlex
import time

import pytest

from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.logs.store import _trim, log_read, log_read_any
from monitoring.models import LogFile
from monitoring.series.read import series_names, series_read
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox

# Progress bars, invalid UTF-8, a NUL byte and a last line without a newline.
TRAINER = r"""
for i in $(seq 1 STEPS); do
  echo "step $i, loss=$(awk "BEGIN{print 2.0/$i}"), samples_per_sec=100"
  printf 'progress 10%%\rprogress 50%%\rprogress 100%%\n'
  printf 'bytes \377\376 and a NUL \000 here\n'
  python3 -c "from portal_metrics import log; log(step=$i, accuracy=$i/STEPS)"
  sleep PAUSE
done
printf 'the end, no newline'
"""


def _trainer(steps: int, pause: float) -> str:
    return TRAINER.replace("STEPS", str(steps)).replace("PAUSE", str(pause)).strip()


def _finished(job: Job) -> bool:
    attempt = Attempt.objects.get(job=job)
    return attempt.is_finished and attempt.files_complete


def _remote_bytes(alice, path: str) -> bytes:
    return alice.run(f"cat {shlex.quote(path)}").stdout


def _assert_log_identical(alice, attempt: Attempt) -> bytes:
    remote = _remote_bytes(alice, attempt.run_dir + "/stdout.log")
    stored = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=len(remote) + 1)
    assert stored.size == len(remote)
    assert stored.data == remote
    return remote


def test_log_metrics_and_gpu_samples_arrive(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(command=_trainer(8, 0.4), gpus_per_node=2),
    )
    wait_for(lambda: _finished(job), QUEUE_WAIT, "the job to finish and its files to be read")
    attempt = Attempt.objects.get(job=job)
    assert attempt.state == State.COMPLETED
    remote = _assert_log_identical(alice, attempt)
    assert remote.endswith(b"the end, no newline")

    names = series_names(attempt_id=attempt.pk)
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert loss.xs == [float(i) for i in range(1, 9)]
    assert loss.ys[0] == 2.0 and abs(loss.ys[-1] - 0.25) < 1e-9
    accuracy = series_read(attempt_id=attempt.pk, name="accuracy")  # from metrics.jsonl
    assert accuracy.xs == [float(i) for i in range(1, 9)]
    assert accuracy.ys[-1] == 1.0
    node = attempt.node_list
    gpu_names = {n for n in names if n.startswith(f"gpu/{node}/")}
    assert {
        f"gpu/{node}/{i}/{m}" for i in (0, 1) for m in ("utilization", "temperature")
    } <= gpu_names
    utilization = series_read(attempt_id=attempt.pk, name=f"gpu/{node}/0/utilization")
    assert utilization.total >= 2
    assert all(0 <= y <= 100 for y in utilization.ys)


def test_log_is_byte_identical_across_an_sshd_restart(
    celery_worker, researcher, project, sandbox_cluster, private_sshd, alice
) -> None:
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(command=_trainer(30, 0.3), gpus_per_node=1),
    )
    wait_for(
        lambda: Job.objects.get(pk=job.pk).state == State.RUNNING, QUEUE_WAIT, "the job to run"
    )
    time.sleep(2)
    try:
        private_sshd.stop()  # its sessions too, the poll's among them
        time.sleep(3)
    finally:
        private_sshd.start()
    wait_for(lambda: _finished(job), QUEUE_WAIT, "the job to finish and its files to be read")
    attempt = Attempt.objects.get(job=job)
    assert attempt.state == State.COMPLETED
    # The fixture's connection died with sshd; the check needs a new one.
    with Connection(alice.endpoint) as fresh:
        _assert_log_identical(fresh, attempt)
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert loss.xs == [float(i) for i in range(1, 31)]


def test_trimmed_log_bytes_are_read_back_from_the_cluster(
    celery_worker, researcher, project, sandbox_cluster, alice, client, settings
) -> None:
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        # Output over several polls, so it is stored as several chunks.
        spec=spec(
            command="for i in $(seq 1 3000); do echo $i; [ $((i % 500)) = 0 ] && sleep 1.2; done",
            gpus_per_node=0,
        ),
    )
    wait_for(lambda: _finished(job), QUEUE_WAIT, "the job to finish and its files to be read")
    attempt = Attempt.objects.select_related("account__cluster").get(job=job)
    remote = _remote_bytes(alice, attempt.run_dir + "/stdout.log")
    # Keep only the last kilobyte here, as a long log would.
    settings.LOG_KEEP_BYTES = 1000
    log_file = LogFile.objects.get(attempt=attempt, name="stdout.log")
    _trim([log_file])
    assert LogFile.objects.get(pk=log_file.pk).first_offset > 0
    head = log_read_any(attempt=attempt, file="stdout.log", offset=0, limit=500)
    assert head.data == remote[:500]
    client.force_login(researcher)
    response = client.get(f"/api/v1/jobs/{job.pk}/attempts/1/log/download")
    assert b"".join(_sync_chunks(response)) == remote


def _sync_chunks(response) -> list[bytes]:
    from asgiref.sync import async_to_sync

    async def collect() -> list[bytes]:
        return [chunk async for chunk in response.streaming_content]

    return async_to_sync(collect)()
