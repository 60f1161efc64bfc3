"""Failures that a retry cannot fix, on the sandbox: diagnosed from the real log, with their fixes.

Two small command jobs print what torch prints when it runs out of GPU memory
and what NCCL's watchdog prints on a timeout, and exit 1, as the real ones do.
"""

import shlex
from pathlib import Path

import pytest
from django.test import Client

from jobs.models import Attempt, FailureClass, Job, JobEvent, State, Template
from jobs.services import job_submit
from tests.e2e.conftest import wait_for
from tests.jobs.factories import spec

pytestmark = pytest.mark.sandbox

LOGS = Path(__file__).resolve().parents[1] / "monitoring" / "fixtures" / "failures"


def _submit(alice, researcher, project, cluster, *, log: str, max_restarts: int) -> Job:
    alice.run("mkdir -p -m 700 portal-failures")
    alice.upload(f"portal-failures/{log}", (LOGS / log).read_bytes(), mode=0o600)
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(
            name=f"fails like {log}",
            template=Template.COMMAND,
            command=f"cat {shlex.quote('portal-failures/' + log)} >&2\nexit 1",
            max_restarts=max_restarts,
        ),
    )


def test_cuda_oom_never_restarts_and_nccl_timeout_gets_network_advice(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    oom = _submit(alice, researcher, project, sandbox_cluster, log="cuda_oom.log", max_restarts=2)
    nccl = _submit(
        alice, researcher, project, sandbox_cluster, log="nccl_timeout.log", max_restarts=0
    )
    wait_for(
        lambda: (
            Attempt.objects.filter(job__in=[oom, nccl], diagnosed_at__isnull=False).count() == 2
        ),
        120,
        "both jobs to end and be diagnosed",
    )
    client = Client()
    client.force_login(researcher)

    # CUDA OOM: diagnosed, not restarted although the job allows 2 restarts, fixes shown.
    (attempt,) = Attempt.objects.filter(job=oom)
    assert attempt.state == State.FAILED and attempt.exit_code == 1
    assert attempt.failure_class == FailureClass.CUDA_OOM
    note = JobEvent.objects.filter(attempt=attempt).order_by("time", "id").last()
    assert note is not None
    assert note.reason == "Not restarted: CUDA out of memory would fail again the same way."
    page = client.get(f"/jobs/{oom.pk}/").content.decode()
    assert "Attempt 1: CUDA out of memory" in page
    for fix in ("micro-batch", "activation checkpointing", "FSDP or DeepSpeed ZeRO"):
        assert fix in page
    assert "would fail again the same way" in page  # on the timeline
    api = client.get(f"/api/v1/jobs/{oom.pk}/failures").json()
    assert api["diagnoses"][0]["diagnosis"]["evidence"].startswith(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory."
    )

    # NCCL timeout: the network advice, on the page and in the API.
    (attempt,) = Attempt.objects.filter(job=nccl)
    assert attempt.failure_class == FailureClass.NCCL_TIMEOUT
    page = client.get(f"/jobs/{nccl.pk}/").content.decode()
    for advice in ("MASTER_ADDR", "MASTER_PORT", "firewall", "/etc/hosts", "NCCL_SOCKET_IFNAME"):
        assert advice in page
    assert "NCCL_DEBUG=INFO" in page
    assert "allows no restarts" in page
    fixes = client.get(f"/api/v1/jobs/{nccl.pk}/failures").json()["diagnoses"][0]["diagnosis"]
    assert fixes["failure_class"] == "nccl_timeout" and fixes["rank"] == 1
