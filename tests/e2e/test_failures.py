"""Endings on the sandbox, three jobs at once: two that a retry cannot fix, one warned in time.

Two small command jobs print what torch prints when it runs out of GPU memory
and what NCCL's watchdog prints on a timeout, and exit 1, as the real ones do:
both are diagnosed from the real log, with their fixes. Beside them the DDP
example gets Slurm's time-limit warning and checkpoints before it would be killed.
"""

import re
import shlex
from pathlib import Path

import pytest
from django.test import Client

from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, Job, JobEvent
from jobs.services import job_submit
from monitoring.models import Checkpoint
from monitoring.series.read import series_last
from tests.factories import spec
from tests.helpers import attempt_shell, run_file, upload_example, wait_for

pytestmark = pytest.mark.sandbox

LOGS = Path(__file__).resolve().parents[1] / "monitoring" / "fixtures" / "failures"


def _submit_failing(alice, researcher, project, cluster, *, log: str, max_restarts: int) -> Job:
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


def _submit_long_trainer(alice, researcher, project, cluster) -> Job:
    trainer = upload_example(alice)
    return job_submit(
        user=researcher,
        project=project,
        cluster=cluster,
        spec=spec(
            name="checkpoints on the warning",
            template=Template.TORCHRUN,
            command=f"{trainer} --steps 500 --checkpoint-every 0 --sleep 0.1",
            nodes=1,
            gpus_per_node=1,
        ),
    )


def test_failures_are_diagnosed_and_the_warning_signal_reaches_the_trainer(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    if alice.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    warned = _submit_long_trainer(alice, researcher, project, sandbox_cluster)
    oom = _submit_failing(
        alice, researcher, project, sandbox_cluster, log="cuda_oom.log", max_restarts=2
    )
    nccl = _submit_failing(
        alice, researcher, project, sandbox_cluster, log="nccl_timeout.log", max_restarts=0
    )
    client = Client()
    client.force_login(researcher)

    # --signal=B:USR1@secs: at limit - secs Slurm signals the batch shell alone
    # (`scancel --batch`, not its children); its trap passes USR1 on to the steps.
    attempt = Attempt.objects.get(job=warned)
    wait_for(
        lambda: (
            series_last(attempt_ids=[attempt.pk], names=["loss"]).get(
                (attempt.pk, "loss"), (0.0, 0.0)
            )[0]
            >= 3
        ),
        120,
        "the trainer to take a few steps",
    )
    attempt.refresh_from_db()
    assert "#SBATCH --signal=B:USR1@60" in run_file(attempt, "job.sbatch")  # 10 min / 10
    with attempt_shell(attempt) as shell:
        sent = shell.run(f"scancel --batch --signal=USR1 {shlex.quote(attempt.slurm_job_id)}")
    assert sent.exit_status == 0, sent.error_text

    wait_for(
        lambda: (
            Attempt.objects.filter(job__in=[oom, nccl, warned], diagnosed_at__isnull=False).count()
            == 3
        ),
        120,
        "the three jobs to end and be diagnosed",
    )

    # The trainer checkpointed and stopped cleanly; the checkpoint is in the registry.
    attempt.refresh_from_db()
    log = run_file(attempt, "stdout.log")
    assert attempt.state == State.COMPLETED and attempt.exit_code == 0, log[-3000:]
    assert "portal: SIGUSR1 before the time limit, passed to the steps" in log
    stopped = re.search(r"stopping after step (\d+) on SIGUSR1", log)
    assert stopped, log[-3000:]
    step = int(stopped[1])
    assert 3 <= step < 500
    assert Checkpoint.objects.filter(
        attempt=attempt, name=f"step-{step}.pt", complete=True
    ).exists()
    # It ended cleanly, but early: the diagnosis says so (and a policy may resume it).
    assert attempt.failure_class == FailureClass.TIME_LIMIT
    assert attempt.diagnosis is not None
    assert attempt.diagnosis["title"] == "Stopped at the time-limit warning"

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


def test_a_drain_runs_scontrol_as_the_staff_members_account(sandbox_cluster, staff) -> None:
    """The sandbox's users are not Slurm operators: Slurm itself refuses, and the page says so."""
    import subprocess

    from django.conf import settings
    from django.contrib.messages import get_messages

    from clusters.models import ClusterAccount
    from clusters.sandbox import daemons
    from clusters.sandbox.config import Paths

    alice = ClusterAccount.objects.get(cluster=sandbox_cluster, username="alice")
    ClusterAccount.objects.create(
        cluster=sandbox_cluster, user=staff, username="alice", private_key=alice.private_key
    )
    client = Client()
    client.force_login(staff)
    paths = Paths.of(settings.SANDBOX_STATE_DIR)
    try:
        response = client.post(
            f"/clusters/{sandbox_cluster.name}/nodes/n1/drain/",
            {"reason": "slow GPU; $(id)", "next": "/"},
        )
    finally:
        state = daemons.node_states(paths).get("n1", "")
        if "drain" in state:  # never leave the shared sandbox with a drained node
            subprocess.run(
                ["scontrol", "update", "nodename=n1", "state=resume"],
                env=daemons.slurm_env(paths),
                check=False,
                timeout=30,
            )
    assert response.status_code == 302
    (message,) = [str(m) for m in get_messages(response.wsgi_request)]
    assert message.startswith("Slurm refused to drain n1 as alice: ")
    assert "operator" in message
    assert "drain" not in state
