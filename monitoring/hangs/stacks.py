"""Asking a hung attempt's ranks for their stacks, and keeping what they wrote.

The signal goes through the portal's own Slurm account where the cluster has
one (an operator may signal any job), else the job's account. Each rank's
Python dumps every thread (faulthandler, installed by the run directory's
sitecustomize) into stacks/rank-<R>.txt; the poll reads those files, capped.
"""

import logging

from clusters.selectors import account_endpoint, portal_endpoint
from clusters.slurm import Slurm, SlurmError
from clusters.ssh import SSHError, pool
from jobs.models import Attempt
from jobs.rundir import STACK_SIGNAL

logger = logging.getLogger(__name__)

REQUEST_STACKS = "monitoring.tasks.request_stacks"
STACK_READ_BYTES = 32 * 1024  # per rank; a dump of a few threads is a few kilobytes
MAX_STACK_RANKS = 64  # ranks whose stacks are read and shown
_DUMP_MARKS = ("(most recent call first)", "Current thread", "Thread 0x")


def attempt_request_stacks(*, attempt_id: int) -> bool:
    """Send the stack signal to every process of the attempt's Slurm job; True if sent."""
    attempt = Attempt.objects.select_related("job__cluster", "account__cluster").get(pk=attempt_id)
    if not attempt.slurm_job_id or attempt.is_finished:
        return False
    cluster = attempt.job.cluster
    endpoints = [portal_endpoint(cluster=cluster)]
    if attempt.account is not None:
        endpoints.append(account_endpoint(account=attempt.account))
    for endpoint in filter(None, endpoints):
        try:
            with pool.session(endpoint) as connection:
                Slurm(connection, tools=cluster.slurm_tools).signal(
                    attempt.slurm_job_id, STACK_SIGNAL
                )
            return True
        except (SSHError, SlurmError) as exc:
            logger.warning(
                "cannot signal job %s as %s: %s", attempt.slurm_job_id, endpoint.username, exc
            )
    return False


def stack_text(data: bytes) -> str:
    """A rank's dump as shown (its header lines only: no dump yet, '')."""
    text = data[:STACK_READ_BYTES].decode("utf-8", errors="replace")
    if not any(mark in text for mark in _DUMP_MARKS):
        return ""
    return "".join(c for c in text if c.isprintable() or c in "\n\t")
