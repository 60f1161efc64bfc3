"""Celery tasks: take ids, call one service. Messages are hints; the database is the truth."""

import logging
import time
from typing import Any

import redis
from celery import shared_task
from django.conf import settings
from redis.exceptions import RedisError

from clusters.selectors import account_endpoint
from clusters.slurm import Slurm
from clusters.ssh import pool
from jobs.accounting import AccountingNotReady, attempt_charge_from_accounting
from jobs.billing import charges_reconcile
from jobs.code.retention import code_snapshots_expire
from jobs.models import Attempt
from jobs.notifications import job_end_send
from jobs.poll.cycle import PARTS, PollResult, cluster_poll
from jobs.poll.health import poll_record
from jobs.poll.lease import lease, poll_lease, submit_lease_key
from jobs.queue.line import line_release, lines_release
from jobs.selectors import clusters_to_poll
from jobs.services import attempts_reconcile
from jobs.submission import SubmitRetry, attempt_submit
from portal_lib.worker_queues import poll_queue, served_queues

logger = logging.getLogger(__name__)

# slurmdbd records a job's end a moment after slurmctld: wait up to ~5 minutes.
CHARGE_RETRIES = 8


@shared_task(
    bind=True,
    autoretry_for=(SubmitRetry,),
    retry_backoff=1,
    retry_backoff_max=30,
    max_retries=8,
)
def submit_attempt(self: Any, attempt_id: int) -> None:
    # One try at a time: a try whose sbatch waits on a controller that is down must not
    # be joined by the reconciler's second try, which would submit the job beside it.
    with lease(_redis(), submit_lease_key(attempt_id)) as held:
        if not held:
            raise SubmitRetry(f"attempt {attempt_id} is being submitted by another try")
        attempt_submit(attempt_id=attempt_id)


@shared_task
def cancel_attempt(attempt_id: int) -> None:
    attempt = Attempt.objects.select_related("account", "account__cluster").get(pk=attempt_id)
    if attempt.account is None or not attempt.slurm_job_id or attempt.is_finished:
        return
    tools = attempt.account.cluster.slurm_tools
    with pool.session(account_endpoint(account=attempt.account)) as connection:
        Slurm(connection, tools=tools).cancel(attempt.slurm_job_id)


def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL)


@shared_task(ignore_result=True)
def poll_cluster(cluster_id: int, part: str = "") -> None:
    """Poll one part of the cluster (jobs.poll.cycle.PARTS), or all of it without one."""
    # One poll of each part per cluster in flight, across all workers; a poll still
    # running when the next beat fires makes that beat a no-op rather than a pile-up.
    parts = (part,) if part else PARTS
    with poll_lease(_redis(), cluster_id, part) as held:
        if not held:
            return
        started = time.monotonic()
        result: PollResult | None = None
        try:
            result = cluster_poll(cluster_id=cluster_id, parts=parts)
        finally:
            seconds = time.monotonic() - started
            poll_record(cluster_id=cluster_id, seconds=seconds, result=result, part=parts[0])


@shared_task(ignore_result=True)
def poll_active_clusters() -> None:
    clusters = clusters_to_poll().values_list("pk", "name")
    expires = max(settings.POLL_INTERVAL * 2, 2.0)
    try:
        served = served_queues(_redis())
    except RedisError:
        served = set()
    for cluster_id, name in clusters:
        queue = poll_queue(name, served)
        for part in PARTS:  # apart: a slow controller does not hold up the logs
            poll_cluster.apply_async((cluster_id, part), expires=expires, queue=queue)


@shared_task(ignore_result=True)
def reconcile_attempts() -> None:
    attempts_reconcile()
    # The backstop of the lines: a release lost with its worker is made here.
    lines_release()


@shared_task(ignore_result=True)
def release_line(project_id: int) -> None:
    """An attempt of the project ended: submit the waiting jobs that fit now, in order."""
    line_release(project_id=project_id)


@shared_task(bind=True, max_retries=CHARGE_RETRIES)
def charge_from_accounting(self: Any, attempt_id: int) -> None:
    try:
        attempt_charge_from_accounting(
            attempt_id=attempt_id, last_try=self.request.retries >= CHARGE_RETRIES
        )
    except AccountingNotReady as exc:
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 60)) from exc


@shared_task(ignore_result=True)
def send_job_end_mail(attempt_id: int) -> None:
    job_end_send(attempt_id=attempt_id)


@shared_task(ignore_result=True)
def reconcile_charges() -> None:
    charges_reconcile()


@shared_task(ignore_result=True)
def remove_unused_code_snapshots() -> None:
    code_snapshots_expire()
