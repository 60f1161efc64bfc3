"""A cluster's readiness report: every check in order, each one that ran, in plain words."""

from collections.abc import Callable

from clusters.errors import ClusterError
from clusters.models import Cluster
from clusters.onboarding.checks import Check, failed
from clusters.onboarding.login import (
    TIMEOUT,
    login_check,
    login_failed,
    login_python,
    no_account,
)
from clusters.onboarding.probe import PROBE_WAIT, ProbeOutcome, probe_nodes
from clusters.onboarding.sampler import sampler_format
from clusters.onboarding.slurm import (
    accounting_check,
    commands_check,
    operator_check,
    partitions_check,
)
from clusters.onboarding.verdicts import python_check, run_dir_check, sampler_check
from clusters.selectors import portal_endpoint, reader_endpoint
from clusters.slurm import Slurm
from clusters.ssh import Connection, SSHError

Progress = Callable[[Check], None]


def readiness_report(
    *, cluster: Cluster, wait: float = PROBE_WAIT, progress: Progress | None = None
) -> list[Check]:
    """Run the checks over one fresh connection, as the portal account where there is one.

    `progress` hears each check as it ends (the command prints them as they come).
    """
    checks: list[Check] = []

    def add(check: Check) -> None:
        checks.append(check)
        if progress is not None:
            progress(check)

    endpoint = portal_endpoint(cluster=cluster) or reader_endpoint(cluster=cluster)
    if endpoint is None:
        add(no_account(cluster))
        return checks
    try:
        connection = Connection(endpoint, connect_timeout=TIMEOUT)
    except SSHError as exc:
        add(login_failed(cluster, exc))
        return checks
    with connection:
        add(login_check(cluster, connection))
        try:
            _slurm_checks(cluster, Slurm(connection, tools=cluster.slurm_tools), wait, add)
        except ClusterError as exc:  # the connection, or Slurm, failed between two checks
            add(
                failed(
                    "Check stopped",
                    f"the check could not go on: {exc}",
                    "Run the check again; the checks after this one did not run.",
                )
            )
    return checks


def _slurm_checks(cluster: Cluster, slurm: Slurm, wait: float, add: Progress) -> None:
    add(commands_check(slurm, cluster))
    check, limits, nodes = partitions_check(slurm, cluster)
    add(check)
    sampler = sampler_format()
    if limits:
        outcome = probe_nodes(
            slurm,
            base_run_dir=cluster.base_run_dir,
            limits=limits,
            nodes=nodes,
            gpu_fields=sampler.fields if sampler else (),
            wait=wait,
        )
    else:
        outcome = ProbeOutcome(error="Slurm listed no partition to run a test job in")
    add(run_dir_check(outcome, cluster.base_run_dir))
    add(python_check(outcome, login_python(slurm.connection)))
    add(sampler_check(outcome, sampler))
    accounting, accounting_on = accounting_check(slurm, job_ids=outcome.job_ids)
    add(accounting)
    add(operator_check(slurm, cluster, accounting=accounting_on))
