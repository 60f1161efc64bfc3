"""GPU-hours charged from real Slurm accounting (sacct via slurmdbd) and from the portal's times."""

import os
import shlex
import subprocess
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.conf import settings

from clusters.models import ClusterAccount
from clusters.sandbox import config
from clusters.slurm.health import cluster_connection_check
from clusters.ssh import Connection
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.services import job_cancel, job_submit
from projects.mirror import mirror_apply
from projects.models import Quota, Reservation, UsageCharge
from projects.selectors import project_usage
from tests.factories import spec
from tests.helpers import QUEUE_WAIT, wait_for

pytestmark = pytest.mark.sandbox


def _attempt(job: Job) -> Attempt:
    return Attempt.objects.get(job=job, number=1)


def _submit(researcher, project, cluster, **overrides: object) -> Job:
    return job_submit(user=researcher, project=project, cluster=cluster, spec=spec(**overrides))


def _sacct(alice: Connection, job_id: str) -> list[str]:
    argv = ["sacct", "-X", "-n", "-P", "-j", job_id, "--format=Elapsed,AllocTRES,State"]
    return alice.run(shlex.join(argv)).text.strip().split("|")


def test_accounting_cluster_charges_sacct_elapsed_and_nothing_for_a_cancelled_pending_job(
    celery_worker, researcher, project, sandbox_cluster, sandbox_info, alice
) -> None:
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd (no MariaDB or slurmdbd installed)")
    sandbox_cluster.accounting_enabled = True
    sandbox_cluster.save()
    # 2 GPUs on one node for ~5 s, and a job needing every GPU that must wait behind it.
    every_gpu = len(config.NODES) * config.GPUS_PER_NODE
    Quota.objects.filter(project=project).update(max_gpus_per_job=every_gpu)
    short = _submit(researcher, project, sandbox_cluster, command="sleep 5", gpus_per_node=2)
    wait_for(lambda: _attempt(short).state == State.RUNNING, QUEUE_WAIT, "the short job to run")
    waiting = _submit(
        researcher,
        project,
        sandbox_cluster,
        command="true",
        nodes=len(config.NODES),
        gpus_per_node=config.GPUS_PER_NODE,
    )
    wait_for(lambda: _attempt(waiting).state == State.PENDING, 30, "the every-GPU job to pend")
    job_cancel(job=waiting, user=researcher)
    wait_for(lambda: _attempt(waiting).state == State.CANCELLED, 30, "the cancel")
    wait_for(
        lambda: UsageCharge.objects.filter(attempt__job=short).exists(), 60, "the sacct charge"
    )
    attempt = _attempt(short)
    charge = UsageCharge.objects.get(attempt=attempt)
    elapsed, tres, state = _sacct(alice, attempt.slurm_job_id)
    minutes, seconds = elapsed.split(":")[-2:]
    assert state == "COMPLETED" and "gres/gpu=2" in tres
    assert (charge.source, charge.gpus) == (UsageCharge.Source.SACCT, 2)
    assert charge.elapsed_seconds == int(minutes) * 60 + int(seconds)
    assert 4 <= charge.elapsed_seconds <= 30
    # Charges round half up to 1/10000 (0.00825 is 0.0083, not the banker's 0.0082).
    assert charge.gpu_hours == (Decimal(2 * charge.elapsed_seconds) / 3600).quantize(
        Decimal("0.0001"), ROUND_HALF_UP
    )
    # The sandbox prices a GPU-hour at 2.50 and a CPU-hour at 0.05.
    assert charge.cost == (
        charge.gpu_hours * Decimal("2.50") + charge.cpu_hours * Decimal("0.05")
    ).quantize(Decimal("0.0001"), ROUND_HALF_UP)
    # The cancelled pending job is charged nothing (sacct says it never started), and
    # nothing stays reserved once sacct has answered for it.
    wait_for(
        lambda: not Reservation.objects.filter(released_at__isnull=True).exists(),
        30,
        "the cancelled job's reservation to be released",
    )
    assert not UsageCharge.objects.filter(attempt__job=waiting).exists()
    usage = project_usage(project=project)
    assert (usage.used_gpu_hours, usage.reserved_gpu_hours) == (
        charge.gpu_hours.quantize(Decimal("0.01")),
        0,
    )


def test_cluster_without_accounting_charges_the_portals_times(
    celery_worker, researcher, project, sandbox_cluster
) -> None:
    assert not sandbox_cluster.accounting_enabled
    job = _submit(
        researcher, project, sandbox_cluster, command="sleep 3", time_limit=timedelta(hours=2)
    )
    assert project_usage(project=project).reserved_gpu_hours == Decimal("2")
    wait_for(
        lambda: UsageCharge.objects.filter(attempt__job=job).exists(), QUEUE_WAIT, "the charge"
    )
    attempt = _attempt(job)
    charge = UsageCharge.objects.get(attempt=attempt)
    assert charge.source == UsageCharge.Source.PORTAL
    assert attempt.started_at and attempt.ended_at
    assert charge.elapsed_seconds == int((attempt.ended_at - attempt.started_at).total_seconds())
    # Charged its real few seconds, not the two hours it reserved.
    assert charge.gpu_hours < Decimal("0.01")
    assert project_usage(project=project).reserved_gpu_hours == 0


@pytest.mark.sandbox_exclusive  # makes bob a Slurm operator for a while
def test_connection_check_and_quota_mirror_on_the_sandbox(
    project, sandbox_cluster, sandbox_info, alice
) -> None:
    check = cluster_connection_check(cluster=sandbox_cluster)
    assert check.ok, check.message
    assert sandbox_cluster.host_key_fingerprint in check.message
    assert "sinfo: gpu* up " in check.message
    if not sandbox_info.accounting:
        pytest.skip("the sandbox runs without slurmdbd: sacctmgr has nothing to change")
    # The shared account applies the mirror as a sacctmgr operator: bob, for this test
    # only (an operator may also cancel others' jobs, which other tests check he cannot).
    ClusterAccount.objects.create(
        cluster=sandbox_cluster, user=None, username="bob", private_key=sandbox_info.users["bob"]
    )
    sandbox_cluster.mirror_quotas = True
    sandbox_cluster.save()
    argv = ["sacctmgr", "-n", "-P", "show", "assoc", "where", "account=vision"]
    argv += ["format=account,user,grptresmins,grptres,grpsubmit"]
    _sacctmgr("add", "user", "bob", "account=root", "AdminLevel=Operator")
    try:
        commands = mirror_apply(project=project, cluster=sandbox_cluster)
        assert mirror_apply(project=project, cluster=sandbox_cluster) == commands  # idempotent
        first = alice.run(shlex.join(argv)).text.splitlines()
        # A CPU-hour budget and a job cap set later reach Slurm too.
        Quota.objects.filter(project=project).update(
            cpu_hours_per_period=Decimal("50"), max_concurrent_jobs=30
        )
        mirror_apply(project=project, cluster=sandbox_cluster)
        second = alice.run(shlex.join(argv)).text.splitlines()
    finally:
        _sacctmgr("delete", "user", "name=bob")
    # A new project's quota has a CPU-hour budget (16,000 h: 960,000 CPU-minutes).
    assert commands[-1] == (
        "sacctmgr --immediate modify account where name=vision set "
        "GrpTRESMins=cpu=960000,node=-1,gres/gpu=6000 GrpTRES=gres/gpu=8 GrpSubmitJobs=-1"
    )
    assert "vision||cpu=960000,gres/gpu=6000|gres/gpu=8|" in first, first
    assert "vision||cpu=3000,gres/gpu=6000|gres/gpu=8|30" in second, second


def _sacctmgr(*args: str) -> None:
    """sacctmgr as root on the sandbox host (the test runs where the sandbox runs)."""
    env = {**os.environ, "SLURM_CONF": str(config.Paths.of(settings.SANDBOX_STATE_DIR).slurm_conf)}
    subprocess.run(
        ["sacctmgr", "--immediate", *args], env=env, capture_output=True, timeout=30, check=False
    )
