"""Readiness checks that ask Slurm on the login node: commands, partitions, accounting, operator.

Every command goes through the Slurm adapter's argv builders and `SlurmTools.wrap`
(absolute path, clean environment), as the portal runs them for jobs.
"""

import re
import shlex
import time
from datetime import timedelta

from django.utils import timezone

from clusters.inventory import PartitionLimits, partition_limits
from clusters.models import Cluster
from clusters.onboarding.checks import Check, failed, passed
from clusters.slurm import AccountingDisabled, Node, Slurm, SlurmError, sacct_argv, sacct_result
from clusters.ssh import SSHError

COMMANDS = "Slurm commands"
PARTITIONS = "Partitions and GPUs"
ACCOUNTING = "Accounting (sacct)"
OPERATOR = "Portal operator account"

# What the portal runs: sbatch, squeue, scancel, scontrol and sinfo always; sacct for charges.
REQUIRED_COMMANDS = ("sbatch", "squeue", "scancel", "scontrol", "sinfo", "sacct")
_VERSION = re.compile(r"slurm(?:-wlm)?\s+(\d+\.\d+(?:\.\d+)?\S*)", re.I)
OPERATOR_LEVELS = ("operator", "administrator")
SACCT_TRIES = 6
SACCT_PAUSE = 2.0  # seconds between sacct's tries for the test jobs


def commands_check(slurm: Slurm, cluster: Cluster) -> Check:
    """Each command the portal runs answers `--version` at its absolute path."""
    versions: dict[str, str] = {}
    missing: list[str] = []
    for command in REQUIRED_COMMANDS:
        argv = slurm.tools.wrap([command, "--version"])
        result = slurm.connection.run(shlex.join(argv), timeout=slurm.timeout)
        found = _VERSION.search(result.text)
        if result.exit_status == 0 and found:
            versions[command] = found[1]
        else:
            said = (result.error_text or result.text).strip().splitlines()
            missing.append(
                f"{argv[-2]} ({said[-1][:200] if said else f'exit {result.exit_status}'})"
            )
    if missing:
        return failed(
            COMMANDS,
            f"not found or not answering as Slurm: {'; '.join(missing)}",
            "Install Slurm's client commands on the login node, or set the cluster's Slurm bin "
            f"directory (now {cluster.slurm_bin_dir}; `cluster add --slurm-bin-dir DIR`, or the "
            "admin's cluster page) to where they are.",
        )
    distinct = sorted(set(versions.values()))
    if len(distinct) > 1:
        listed = ", ".join(f"{name} {version}" for name, version in versions.items())
        return failed(
            COMMANDS,
            f"the commands are of different Slurm versions: {listed}",
            "Install one Slurm release's client commands on the login node.",
        )
    return passed(
        COMMANDS,
        f"{', '.join(REQUIRED_COMMANDS)} answer at {cluster.slurm_bin_dir}, Slurm {distinct[0]}",
    )


def partitions_check(
    slurm: Slurm, cluster: Cluster
) -> tuple[Check, dict[str, PartitionLimits], list[Node]]:
    """The partitions (scontrol) and the GPUs their nodes offer in gres."""
    try:
        partitions = slurm.partitions()
        nodes = slurm.nodes()
    except SlurmError as exc:
        check = failed(
            PARTITIONS,
            f"scontrol could not list the partitions: {exc.slurm_message}",
            "Make sure slurmctld runs and the login node reaches it (`scontrol ping`); where "
            "slurm.conf is not at Slurm's default path, set the cluster's SLURM_CONF.",
        )
        return check, {}, []
    limits = partition_limits(partitions, nodes)
    if not partitions:
        fix = "Define at least one partition (PartitionName=...) in slurm.conf."
        return failed(PARTITIONS, "Slurm has no partitions", fix), limits, nodes
    described = []
    for partition in partitions:
        limit = limits[partition.name]
        default = " (default)" if partition.is_default else ""
        gpus = f"{limit.gpus_per_node} GPUs per node" if limit.gpus_per_node else "no GPUs"
        state = "" if partition.state.upper() == "UP" else f", {partition.state}"
        described.append(f"{partition.name}{default}: {limit.nodes} nodes, {gpus}{state}")
    down = [node.name for node in nodes if not node.is_available]
    detail = "; ".join(described) + (f"; nodes not taking jobs: {', '.join(down)}" if down else "")
    up = [p for p in partitions if p.state.upper() == "UP"]
    if not up:
        fix = "Bring a partition up: scontrol update partitionname=NAME state=up."
        return failed(PARTITIONS, detail, fix), limits, nodes
    if not any(limits[p.name].gpus_per_node for p in up):
        fix = (
            "Declare the GPUs in gres: GresTypes=gpu in slurm.conf, Gres=gpu:TYPE:COUNT on the "
            "GPU nodes' NodeName lines, and their device files in gres.conf; restart slurmd."
        )
        return failed(PARTITIONS, f"{detail}; no node offers a GPU", fix), limits, nodes
    if cluster.default_partition and cluster.default_partition not in limits:
        fix = "Set the cluster's default partition to one Slurm has, or leave it blank."
        default = cluster.default_partition
        message = f"{detail}; the portal's default partition {default!r} is none of them"
        return failed(PARTITIONS, message, fix), limits, nodes
    return passed(PARTITIONS, detail), limits, nodes


def accounting_check(slurm: Slurm, *, job_ids: list[str]) -> tuple[Check, bool]:
    """sacct answers and knows the test jobs just run; (check, whether accounting is on)."""
    since = timezone.now() - timedelta(hours=1)
    argv = slurm.tools.wrap(sacct_argv(since=since, all_users=True, job_ids=job_ids or None))
    command = shlex.join(argv)
    try:
        for _ in range(SACCT_TRIES):  # slurmctld sends job records to slurmdbd in the background
            result = slurm.connection.run(command, timeout=slurm.timeout)
            rows = sacct_result(result, command="sacct")
            if {row.job_id for row in rows} >= set(job_ids):
                break
            time.sleep(SACCT_PAUSE)
    except AccountingDisabled as exc:
        return failed(
            ACCOUNTING,
            f"sacct answers that Slurm keeps no job records ({exc.slurm_message})",
            "Run slurmdbd and set AccountingStorageType=accounting_storage/slurmdbd (with "
            "AccountingStorageHost) in slurm.conf, then restart slurmctld. Until then the "
            "portal charges GPU-hours from its own start and end times and cannot mirror "
            "quotas into Slurm.",
        ), False
    except SlurmError as exc:
        return failed(
            ACCOUNTING,
            f"sacct failed: {exc.slurm_message}",
            "Check that slurmdbd runs and slurmctld reaches it (`sacctmgr show cluster`).",
        ), False
    if not job_ids:
        return passed(ACCOUNTING, f"sacct answers ({len(rows)} jobs in the last hour)"), True
    known = {row.job_id for row in rows}
    unknown = [job_id for job_id in job_ids if job_id not in known]
    if unknown:
        return failed(
            ACCOUNTING,
            f"sacct answers but does not know the test jobs {', '.join(unknown)}",
            "slurmctld is not sending job records to slurmdbd: check AccountingStorageType "
            "and AccountingStorageHost in slurm.conf and slurmctld's log.",
        ), True
    return passed(
        ACCOUNTING, f"sacct answers and recorded the test jobs {', '.join(job_ids)}"
    ), True


def operator_check(slurm: Slurm, cluster: Cluster, *, accounting: bool) -> Check:
    """The portal account logs in, and is a Slurm operator (sees and cancels every job)."""
    name = cluster.portal_username
    if not cluster.has_portal_account:
        return failed(
            OPERATOR,
            "the cluster has no portal account: job state and charges would be read through "
            "the users' own logins, which their jobs can tamper with",
            "Create a login only the portal uses (e.g. portal-svc) and give it with "
            "`cluster add --operator-user NAME --operator-key FILE` (or `--trusts-ca` where "
            "the login nodes trust the portal's CA), or under the cluster's portal account "
            "in the admin.",
        )
    make_operator = f"sacctmgr -i add user {name} account=root adminlevel=operator"
    if not accounting:
        return failed(
            OPERATOR,
            f"logged in as {name}, but without Slurm accounting no account can be a Slurm "
            "operator: the portal cannot cancel a job that renamed itself or drain a node",
            f"Turn accounting on (see above), then: {make_operator}",
        )
    argv = ["sacctmgr", "--noheader", "--parsable2", "show", "user", name, "format=User,AdminLevel"]
    try:
        result = slurm.connection.run(shlex.join(slurm.tools.wrap(argv)), timeout=slurm.timeout)
    except SSHError as exc:
        return failed(OPERATOR, f"sacctmgr could not be asked: {exc}", "Run the check again.")
    levels = [line.split("|")[1] for line in result.text.splitlines() if line.count("|") >= 1]
    if result.exit_status != 0 or not levels:
        said = result.error_text.strip()[:200]
        return failed(
            OPERATOR,
            f"logged in as {name}, but Slurm's accounting does not know the user"
            + (f" ({said})" if said else ""),
            make_operator,
        )
    if levels[0].strip().lower() not in OPERATOR_LEVELS:
        return failed(
            OPERATOR,
            f"logged in as {name}, a Slurm user of admin level {levels[0].strip() or 'None'}: it "
            "cannot cancel a job that renamed itself, drain a node, or see jobs PrivateData hides",
            f"sacctmgr -i modify user {name} set adminlevel=operator",
        )
    return passed(OPERATOR, f"logged in as {name}, a Slurm {levels[0].strip().lower()}")
