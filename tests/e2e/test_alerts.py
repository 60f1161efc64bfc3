"""Alerts on real jobs: a NaN loss reaches a webhook on loopback within 30 s of being
printed, once, and a job's start and end are told once each."""

import time

import pytest
from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.logs.store import log_read
from monitoring.models import Alert, AlertKind, AlertRule
from projects.models import Project
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for
from tests.webhook_receiver import webhook_receiver

pytestmark = pytest.mark.sandbox

# Finite losses, then NaN (printed as nanoGPT prints it) on several polls, then the end.
TRAINER = r"""
for i in 1 2 3; do echo "iter $i: loss 2.$i, time 98.21ms, mfu 12.41%"; sleep 0.5; done
echo "nan_at=$(date +%s.%N)"
for i in $(seq 4 24); do echo "iter $i: loss nan, time 98.21ms, mfu 12.41%"; sleep 1; done
"""


def _done(job: Job) -> bool:
    attempt = Attempt.objects.get(job=job)
    return attempt.is_finished and attempt.files_complete


def test_nan_loss_start_and_end_reach_the_webhook_once(
    celery_worker: object, researcher: User, project: Project, sandbox_cluster: Cluster
) -> None:
    with webhook_receiver() as (url, bodies):
        for kind in (AlertKind.LOSS_NONFINITE, AlertKind.STARTED, AlertKind.ENDED):
            AlertRule.objects.create(owner=researcher, kind=kind, webhook_url=url)
        job = job_submit(
            user=researcher,
            project=project,
            cluster=sandbox_cluster,
            spec=spec(command=TRAINER.strip()),
        )

        def nan_told() -> bool:
            return any("is NaN" in b["text"] for b in bodies)

        wait_for(nan_told, QUEUE_WAIT, "the NaN alert at the webhook")
        told_at = time.time()
        wait_for(lambda: _done(job), QUEUE_WAIT, "the job to end and its log to be read")
        wait_for(lambda: len(bodies) >= 3, 60, "the ended alert at the webhook")
        time.sleep(3)  # a second delivery, were there one, would come in by now
        attempt = Attempt.objects.get(job=job)
        log = log_read(attempt_id=attempt.pk, file="stdout.log", offset=0, limit=1 << 20).data

    texts = sorted(b["text"] for b in bodies)
    assert len(texts) == 3, texts
    nan = Alert.objects.get(job=job, kind=AlertKind.LOSS_NONFINITE)
    assert nan.webhook_at is not None and nan.webhook_error == ""
    assert f"/jobs/{job.pk}/?attempt=1" in next(t for t in texts if "is NaN" in t)
    assert any(t.startswith(f"{job.name} (attempt 1) started") for t in texts)
    assert any(f"{job.name} (attempt 1) ended: Completed" in t for t in texts)
    nan_at = float(log.split(b"nan_at=")[1].split(b"\n")[0])
    assert told_at - nan_at <= 30, f"{told_at - nan_at:.1f} s from the NaN to the webhook"
