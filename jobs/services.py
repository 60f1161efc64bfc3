"""Writes on jobs: submit, cancel, and re-driving what got stuck."""

import logging
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from clusters.inventory import PartitionLimits, cluster_partitions
from clusters.models import Cluster
from jobs.errors import JobError
from jobs.models import FINAL_STATES, Attempt, Job, JobEvent, State
from jobs.selectors import account_for, membership_for
from jobs.specs import JobSpec, validate_spec
from jobs.states import attempt_transition
from projects.models import Project, Quota
from projects.services import attempt_reserve

logger = logging.getLogger(__name__)


def job_submit(
    *,
    user: User,
    project: Project,
    cluster: Cluster,
    spec: JobSpec,
    partitions: dict[str, PartitionLimits] | None = None,
) -> Job:
    """Check the request, record the job and its first attempt, and queue the submission."""
    membership = membership_for(user=user, project_id=project.pk)
    if membership is None or not membership.can_submit:
        raise JobError(
            f"You cannot submit jobs in project {project.slug}: ask one of its owners to "
            "add you as a member."
        )
    if not cluster.is_active:
        raise JobError(f"Cluster {cluster.name} is not taking jobs; choose another cluster.")
    account = account_for(user=user, cluster=cluster)
    if account is None:
        raise JobError(
            f"You have no account on cluster {cluster.name}, and it has no shared one: "
            "ask an admin to add your cluster account."
        )
    if partitions is None:
        partitions = cluster_partitions(cluster=cluster, account=account)
    quota = Quota.objects.filter(project=project).first()
    errors = validate_spec(spec=spec, partitions=partitions, quota=quota)
    if errors:
        raise JobError("The job cannot be submitted as it is.", errors=errors)

    with transaction.atomic():
        job = Job.objects.create(
            project=project,
            user=user,
            cluster=cluster,
            **spec.job_fields(),
            state=State.QUEUED,
        )
        attempt = Attempt.objects.create(job=job, number=1, account=account)
        # Under the project's quota lock; a refusal rolls the job back.
        attempt_reserve(attempt=attempt)
        JobEvent.objects.create(
            job=job,
            attempt=attempt,
            time=timezone.now(),
            to_state=State.QUEUED,
            reason=f"Submitted by {user.get_username()}.",
        )
        _queue_submission(attempt.pk)
    return job


def _queue_submission(attempt_id: int) -> None:
    from jobs.tasks import submit_attempt

    transaction.on_commit(lambda: submit_attempt.delay(attempt_id))


def job_cancel(*, job: Job, user: User) -> None:
    """Cancel the job's live attempt: at once if Slurm has not got it, else via scancel."""
    membership = membership_for(user=user, project_id=job.project_id)
    if not (job.user_id == user.pk or (membership and membership.role == "owner")):
        raise JobError("Only the job's submitter or a project owner can cancel it.")
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update()
            .filter(job=job)
            .exclude(state__in=FINAL_STATES)
            .order_by("-number")
            .first()
        )
        if attempt is None:
            return
        now = timezone.now()
        Attempt.objects.filter(pk=attempt.pk).update(cancel_requested_at=now)
        attempt.cancel_requested_at = now
        if attempt.state == State.QUEUED:
            attempt_transition(
                attempt=attempt,
                to=State.CANCELLED,
                reason=f"Cancelled by {user.get_username()} before submission.",
                ended_at=now,
            )
            return
        if attempt.slurm_job_id:
            attempt_id = attempt.pk
            from jobs.tasks import cancel_attempt

            transaction.on_commit(lambda: cancel_attempt.delay(attempt_id))
        # Still SUBMITTING: the submission cancels the job once it has its id.


def attempts_reconcile() -> int:
    """Re-queue submissions whose task was lost; the database is the source of truth."""
    # A submission still in flight this long lost its task (worker killed,
    # message lost) and is handed to a new one, which adopts the job if it exists.
    cutoff = timezone.now() - timedelta(seconds=settings.SUBMIT_STUCK_AFTER)
    stuck = list(
        Attempt.objects.filter(
            state__in=(State.QUEUED, State.SUBMITTING), state_changed_at__lt=cutoff
        ).values_list("pk", flat=True)
    )
    for attempt_id in stuck:
        _queue_submission(attempt_id)
    if stuck:
        logger.info("re-driving %d stuck submissions", len(stuck))
    return len(stuck)
