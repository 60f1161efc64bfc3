"""Charging an ended attempt from Slurm's own accounting (sacct)."""

import logging
from datetime import timedelta

from django.utils import timezone

from clusters.selectors import account_endpoint, portal_endpoint
from clusters.slurm import AccountingDisabled, SlurmError
from clusters.slurm.accounting import job_accounting
from clusters.ssh import SSHError, pool
from jobs.billing import attempt_charge
from jobs.identity import CLOCK_SKEW, is_attempts_job
from jobs.models import Attempt
from projects.models import UsageCharge
from projects.services import Measured

logger = logging.getLogger(__name__)


class AccountingNotReady(Exception):
    """sacct cannot answer yet (no record, or the cluster is unreachable): try again later."""


def measured_by_sacct(attempt: Attempt) -> Measured | None:
    """The attempt's GPUs, CPUs, nodes and elapsed time as slurmdbd recorded them.

    The records are the attempt's by its user and submit time, whatever the job renamed
    itself; a job that requeued itself is charged for every run (from its first start,
    for their elapsed times together). None if it never started.
    """
    if attempt.account is None or not attempt.slurm_job_id:
        raise AccountingNotReady("the attempt has no Slurm job or account to ask about")
    since = (attempt.submitted_at or attempt.created_at) - CLOCK_SKEW
    cluster = attempt.account.cluster
    # The portal's own account: sacct through the job's own user is the job's word.
    endpoint = portal_endpoint(cluster=cluster) or account_endpoint(account=attempt.account)
    try:
        with pool.session(endpoint) as connection:
            records = job_accounting(
                connection, job_id=attempt.slurm_job_id, since=since, tools=cluster.slurm_tools
            )
    except SSHError as exc:
        raise AccountingNotReady(str(exc)) from exc
    runs = [r for r in records if is_attempts_job(attempt, user=r.user, submitted=r.submit_time)]
    if not runs or any(run.end_time is None for run in runs):
        raise AccountingNotReady(f"sacct has no finished record of job {attempt.slurm_job_id}")
    # Cancelled while pending: no nodes (sacct still shows Start = End for it).
    ran = [r for r in runs if r.start_time is not None and r.elapsed is not None and r.node_list]
    starts = [r.start_time for r in ran if r.start_time is not None]
    if not starts:
        return None
    elapsed = sum((r.elapsed for r in ran if r.elapsed is not None), timedelta())
    job = attempt.job
    # The allocation as Slurm made it; a record without TRES falls back to the request.
    return Measured(
        gpus=max(r.gpus for r in ran) or job.total_gpus,
        cpus=max(r.cpus for r in ran) or job.total_cpus,
        nodes=max(r.node_count for r in ran) or job.nodes,
        started_at=starts[0],
        ended_at=starts[0] + elapsed,
        source=UsageCharge.Source.SACCT,
    )


def attempt_charge_from_accounting(*, attempt_id: int, last_try: bool = False) -> bool:
    """Charge from sacct; on the last try fall back to the portal's times. True when done."""
    attempt = (
        Attempt.objects.select_related("job", "account", "account__cluster")
        .filter(pk=attempt_id)
        .first()
    )
    if attempt is None:
        return True  # deleted meanwhile: nothing left to charge
    if UsageCharge.objects.filter(attempt=attempt).exists():
        return True
    try:
        measured = measured_by_sacct(attempt)
    except AccountingDisabled:
        logger.warning(
            "cluster %s has accounting switched on in the portal but sacct says it is off",
            attempt.job.cluster_id,
        )
        measured = None
        last_try = True
    except (AccountingNotReady, SlurmError) as exc:
        if not last_try:
            raise AccountingNotReady(str(exc)) from exc
        logger.warning("charging attempt %s from portal times: %s", attempt.pk, exc)
        measured = None
    else:
        # None from sacct: it never started (cancelled while pending): nothing to charge.
        attempt_charge(attempt=attempt, measured=measured, never_ran=measured is None)
        return True
    # No sacct answer: the portal's own times (None: nothing ran, only the release).
    attempt_charge(attempt=attempt, measured=None)
    logger.info("attempt %s charged at %s without sacct", attempt.pk, timezone.now())
    return True
