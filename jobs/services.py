"""Writes on jobs: submit, start an attempt, cancel, notes, diagnoses, logged settings,
re-driving."""

import logging
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from clusters.inventory import PartitionLimits, cluster_partitions
from clusters.models import Cluster, ClusterAccount
from clusters.selectors import account_for
from jobs.access import require_annotator, require_canceller, require_submitter
from jobs.billing import RoomFull, attempt_reserve
from jobs.enums import FINAL_STATES, State
from jobs.errors import JobError
from jobs.lineage import ForkPoint
from jobs.models import Attempt, Job, JobEvent
from jobs.notes import clean_group, clean_note, clean_tags
from jobs.params import SOURCE_LOGGED, ParamValue, params_merge
from jobs.queue.line import wait_reason
from jobs.specs import JobSpec, preflight_asked, validate_spec
from jobs.states import attempt_note, attempt_transition
from jobs.submit_rate import submit_rate_check
from portal_lib.queueing import queue_check, queue_on_commit
from projects.models import Project, Quota

logger = logging.getLogger(__name__)

SUBMIT_ATTEMPT = "jobs.tasks.submit_attempt"
CANCEL_ATTEMPT = "jobs.tasks.cancel_attempt"


def job_submit(
    *,
    user: User,
    project: Project,
    cluster: Cluster,
    spec: JobSpec,
    partitions: dict[str, PartitionLimits] | None = None,
    fork: ForkPoint | None = None,
) -> Job:
    """Check the request, record the job and its first attempt, and queue the submission.

    A fork (jobs.lineage) records its parent and resumes from the parent's checkpoint.
    """
    require_submitter(user=user, project=project)
    if fork is not None:
        fork.check_place(user=user, project=project, cluster=cluster)
    account = submit_account(user=user, cluster=cluster)
    if fork is not None:
        fork.check_account(account)
    if partitions is None:
        partitions = cluster_partitions(cluster=cluster, account=account)
    quota = Quota.objects.filter(project=project).first()
    errors = validate_spec(spec=spec, partitions=partitions, quota=quota)
    if errors:
        raise JobError("The job cannot be submitted as it is.", errors=errors)
    queue_check("the job")

    with transaction.atomic():
        submit_rate_check(user=user)
        job = Job.objects.create(
            project=project,
            user=user,
            cluster=cluster,
            **{**spec.job_fields(), "preflight": preflight_asked(project=project, spec=spec)},
            **(fork.job_fields() if fork else {}),
            state=State.QUEUED,
        )
        attempt_start(
            job=job,
            number=1,
            account=account,
            reason=fork.reason(user) if fork else f"Submitted by {user.get_username()}.",
            resume_from=fork.checkpoint if fork else "",
        )
    return job


def submit_account(*, user: User, cluster: Cluster) -> ClusterAccount:
    """The account the user's jobs run as on the cluster, or why none can run there."""
    if not cluster.is_active:
        raise JobError(f"Cluster {cluster.name} is not taking jobs; choose another cluster.")
    account = account_for(user=user, cluster=cluster)
    if account is None:
        raise JobError(
            f"You have no account on cluster {cluster.name}, and it has no shared one: "
            "ask an admin to add your cluster account."
        )
    return account


def attempt_start(
    *,
    job: Job,
    number: int,
    account: ClusterAccount | None,
    reason: str,
    resume_from: str = "",
    excluded_nodes: str = "",
) -> Attempt:
    """A new attempt of the job: its row, its reservation, its event and its queued submission.

    One transaction: a quota refusal (a JobError saying why) leaves nothing behind. Used by
    the first submission and by every restart. An attempt that only a concurrency limit
    stops, or that jobs of its project wait ahead of, is accepted as WAITING in the
    project's line instead (no reservation, nothing queued; jobs.queue.line releases it).
    """
    with transaction.atomic():
        attempt = Attempt.objects.create(
            job=job,
            number=number,
            account=account,
            resume_from=resume_from,
            excluded_nodes=excluded_nodes,
        )
        waits = _reserve_or_wait(attempt, project=job.project)
        state = State.WAITING if waits else State.QUEUED
        if waits:
            Attempt.objects.filter(pk=attempt.pk).update(state=state, reason=waits)
            Job.objects.filter(pk=job.pk).update(state=state)
            attempt.state, attempt.reason, job.state = state, waits, state
        JobEvent.objects.create(
            job=job,
            attempt=attempt,
            time=timezone.now(),
            to_state=state,
            reason=f"{reason} {waits}" if waits else reason,
        )
        if not waits:
            _queue_submission(attempt.pk)
    return attempt


class _Behind(Exception):
    """The attempt fits now, but jobs of its project came first: it waits behind them."""


def _reserve_or_wait(attempt: Attempt, *, project: Project) -> str:
    """Reserve the attempt's share of the quota (empty), or why it waits in the line.

    Under the project's quota row lock, so the line and the reservations are read by one
    submission or release at a time; a refusal for any other rule raises JobError.
    """
    Quota.objects.select_for_update().filter(project=project).first()
    ahead = (
        Attempt.objects.filter(job__project=project, state=State.WAITING)
        .exclude(pk=attempt.pk)
        .count()
    )
    try:
        with transaction.atomic():
            attempt_reserve(attempt=attempt)
            if ahead:
                raise _Behind  # rolls the reservation back: first come, first served
    except RoomFull as exc:
        return wait_reason(exc.message)
    except _Behind:
        jobs = "job" if ahead == 1 else "jobs"
        return wait_reason(f"{ahead} {jobs} of project {project.slug} came first")
    return ""


def _queue_submission(attempt_id: int) -> None:
    # `attempts_reconcile` re-sends a submission whose message was lost.
    queue_on_commit(SUBMIT_ATTEMPT, attempt_id, redriven=True)


def job_annotate(
    *,
    job: Job,
    user: User,
    note: str | None = None,
    tags: list[str] | None = None,
    group: str | None = None,
) -> Job:
    """Write the run's note, tags and group (None: leave that one as it is).

    All three are checked before anything is written, so a refused tag changes no note.
    """
    require_annotator(user=user, job=job)
    changes: dict[str, Any] = {}
    if note is not None:
        changes["note"] = clean_note(note)
    if tags is not None:
        changes["tags"] = clean_tags(tags)
    if group is not None:
        changes["group"] = clean_group(group)
    if changes:
        with transaction.atomic():
            # An update of these columns only: a poll writing the state meanwhile keeps it.
            Job.objects.filter(pk=job.pk).update(**changes, updated_at=timezone.now())
        for name, value in changes.items():
            setattr(job, name, value)
    return job


def job_cancel(*, job: Job, user: User) -> None:
    """Cancel the job's live attempt: at once if Slurm has not got it, else via scancel."""
    require_canceller(user=user, job=job)
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
        if attempt.state in (State.WAITING, State.QUEUED):
            # Never handed to Slurm: a waiting job leaves its line, a queued one its queue.
            where = " while waiting in line" if attempt.state == State.WAITING else ""
            attempt_transition(
                attempt=attempt,
                to=State.CANCELLED,
                reason=f"Cancelled by {user.get_username()}{where} before submission.",
                ended_at=now,
            )
            return
        if attempt.slurm_job_id:
            queue_on_commit(CANCEL_ATTEMPT, attempt.pk)
        # Still SUBMITTING: the submission cancels the job once it has its id.


def attempt_cancel_by_portal(*, attempt: Attempt, reason: str) -> bool:
    """Cancel a live attempt for one of the portal's own rules (idle GPUs, a hang), once.

    The timeline says why; False when it had ended or a cancel was asked for already.
    """
    with transaction.atomic():
        now = timezone.now()
        claimed = (
            Attempt.objects.filter(pk=attempt.pk, cancel_requested_at__isnull=True)
            .exclude(state__in=FINAL_STATES)
            .update(cancel_requested_at=now)
        )
        if not claimed:
            return False
        attempt.cancel_requested_at = now
        attempt_note(attempt=attempt, reason=reason, at=now)
        if attempt.slurm_job_id:
            queue_on_commit(CANCEL_ATTEMPT, attempt.pk)
    return True


def attempt_diagnosis_claim(*, attempt: Attempt) -> bool:
    """Claim an ended attempt's one diagnosis; False when another poll claimed it first."""
    now = timezone.now()
    claimed = Attempt.objects.filter(pk=attempt.pk, diagnosed_at__isnull=True).update(
        diagnosed_at=now
    )
    if claimed:
        attempt.diagnosed_at = now
    return bool(claimed)


def attempt_diagnosis_store(*, attempt: Attempt, failure_class: str, diagnosis: Any) -> None:
    """Record why a claimed attempt ended (`monitoring.diagnosis` decides it)."""
    attempt.failure_class, attempt.diagnosis = failure_class, diagnosis
    Attempt.objects.filter(pk=attempt.pk).update(failure_class=failure_class, diagnosis=diagnosis)


def job_params_log(*, job_id: int, logged: Mapping[str, ParamValue]) -> None:
    """Lay settings the run logged over the job's table (the run says what really ran)."""
    with transaction.atomic():
        job = Job.objects.select_for_update().only("params", "param_sources").get(pk=job_id)
        params, sources = params_merge(
            job.params or {}, job.param_sources or {}, logged, SOURCE_LOGGED
        )
        if params != job.params or sources != job.param_sources:
            Job.objects.filter(pk=job_id).update(params=params, param_sources=sources)


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
