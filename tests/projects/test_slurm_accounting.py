"""Pure parts of accounting: sacct rows for charging, sacctmgr argv, the sandbox's slurmdbd config."""

import shlex
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

from clusters.sandbox import accounting as sandbox_accounting
from clusters.sandbox.config import Paths, render_slurm_conf, render_slurmdbd_conf
from clusters.slurm import parse_sacct
from clusters.slurm.accounting import AccountLimits, account_add_argv, account_limits_argv
from projects.mirror import mirror_plan
from projects.models import Project, Quota
from tests.clusters.slurm_output import SACCT_FIELDS_2026_12_01

SEP = "\x1f"
# Captured from the sandbox's sacct (slurmdbd on MariaDB), sacct_argv's format.
SACCT = "\n".join(
    SEP.join(fields)
    for fields in (
        ["6", "COMPLETED", "0:0", "2026-12-01T04:07:55", "2026-12-01T04:08:00", "00:00:05",
         "00:10:00", "1", "n1", "billing=1,cpu=1,gres/gpu=2,mem=3013M,node=1", "",
         "portal-e47a6e26-c659-4a82-a18c-51880348f30e"],
        # Cancelled while pending: Start = End, no nodes.
        ["8", "CANCELLED by 1001", "0:0", "2026-12-01T04:07:56", "2026-12-01T04:07:56",
         "00:00:00", "00:10:00", "2", "None assigned", "", "",
         "portal-79a6d778-6fc9-41b2-81d5-836f904a0887"],
        # Cancelled before the scheduler looked at it: no Start at all.
        ["22", "CANCELLED by 1001", "0:0", "None", "2026-12-01T04:10:25", "00:00:00",
         "00:10:00", "1", "None assigned", "", "", "portal-89b10a10-babd-4297-855e-b7b892f3cc88"],
        # Cancelled while running: charged for its 14 s.
        ["18", "CANCELLED by 1001", "0:0", "2026-12-01T04:09:46", "2026-12-01T04:10:00",
         "00:00:14", "00:10:00", "2", "n[1-2]", "billing=4,cpu=4,gres/gpu=2,mem=12052M,node=2",
         "", "portal-be829a3a-0abb-4d64-951f-e20b7f795278"],
    )
)  # fmt: skip


def test_sacct_rows_give_gpus_elapsed_and_whether_it_ran() -> None:
    done, pending, unscheduled, cancelled = parse_sacct(SACCT, fields=SACCT_FIELDS_2026_12_01)
    assert (done.gpus, done.elapsed, done.node_list) == (2, timedelta(seconds=5), "n1")
    assert (pending.node_list, pending.elapsed, pending.gpus) == ("", timedelta(0), 0)
    assert (unscheduled.start_time, unscheduled.node_list) == (None, "")
    assert (cancelled.state, cancelled.gpus, cancelled.elapsed) == (
        "CANCELLED",
        2,
        timedelta(seconds=14),
    )


def test_sacctmgr_arguments_are_single_words() -> None:
    limits = AccountLimits(gpu_minutes=6000, cpu_minutes=120, running_gpus=8)
    assert shlex.join(account_limits_argv(account="vision", limits=limits)) == (
        "sacctmgr --immediate modify account where name=vision set "
        "GrpTRESMins=cpu=120,node=-1,gres/gpu=6000 GrpTRES=gres/gpu=8 GrpSubmitJobs=-1"
    )
    cleared = account_limits_argv(account="vision", limits=AccountLimits())
    assert cleared[-3:] == [
        "GrpTRESMins=cpu=-1,node=-1,gres/gpu=-1",
        "GrpTRES=gres/gpu=-1",
        "GrpSubmitJobs=-1",
    ]
    argv = account_add_argv(account="vision", description="Vision; rm -rf / 'models'")
    assert shlex.split(shlex.join(argv)) == argv
    assert argv[-1] == "Description=Vision; rm -rf / 'models'"


def test_mirror_plan_is_a_dry_run_of_the_quota(db: None) -> None:
    project = Project.objects.create(slug="nlp", name="Language models", slurm_account="nlp")
    quota = Quota.objects.create(
        project=project,
        gpu_hours_per_period=Decimal("12.5"),
        cpu_hours_per_period=Decimal("100"),
        max_concurrent_jobs=20,
    )
    plan = mirror_plan(project=project, quota=quota)
    assert plan.commands == [
        "sacctmgr --immediate add account nlp 'Description=Language models'",
        "sacctmgr --immediate modify account where name=nlp set "
        "GrpTRESMins=cpu=6000,node=-1,gres/gpu=750 GrpTRES=gres/gpu=-1 GrpSubmitJobs=20",
    ]
    project.slurm_account = ""
    assert mirror_plan(project=project, quota=quota).why_not.startswith("The project has no Slurm")


def test_sandbox_accounting_config(tmp_path: Path) -> None:
    paths = Paths.of(tmp_path)
    plain = render_slurm_conf(paths, "host", 2, 4000)
    with_dbd = render_slurm_conf(paths, "host", 2, 4000, accounting=True)
    assert "AccountingStorageType=accounting_storage/none" in plain
    assert "AccountingStorageType=accounting_storage/slurmdbd" in with_dbd
    assert "AccountingStoragePort=16819" in with_dbd
    assert f"AccountingStoragePass={paths.munge_socket}" in with_dbd
    assert "AccountingStorageTRES=gres/gpu" in with_dbd
    assert "AccountingStorageEnforce" not in with_dbd  # queued jobs without associations still run
    # Switching accounting is a slurmctld-only restart; other changes restart the nodes too.
    assert sandbox_accounting.is_only_accounting_change(plain, with_dbd)
    assert not sandbox_accounting.is_only_accounting_change(
        plain, render_slurm_conf(paths, "host", 4, 4000, accounting=True)
    )
    dbd = render_slurmdbd_conf(paths, "s3cret")
    assert "StoragePass=s3cret" in dbd and "StoragePort=16306" in dbd
    assert f"AuthInfo=socket={paths.munge_socket}" in dbd
