"""A project's line: jobs its concurrency limits have no room for wait here, in order.

A job over its project's concurrent-jobs or concurrent-GPUs limit (and nothing else) is
accepted as WAITING by `jobs.services.attempt_start`, with no reservation and nothing
queued. When an attempt of the project ends (jobs.states queues `release_line`), and on
every reconcile beat as a backstop, `line_release` hands the waiting jobs that fit now
to the submission, first come first served: the oldest waiting attempt first, and none
behind it while it does not fit. Each project has its own line.

Exactly once: a release is one transaction under the project's quota row lock (the
lock every reservation takes), moving WAITING to QUEUED with its reservation and its
submission queued on commit. A worker killed before the commit leaves the job waiting
for the next release; one killed after it leaves a QUEUED attempt whose lost message
`attempts_reconcile` re-sends, and the submission's own lease and adoption make one
Slurm job of it.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import QuerySet

from jobs.billing import RoomFull, attempt_reserve
from jobs.enums import State
from jobs.errors import JobError
from jobs.models import Attempt, Job
from jobs.states import attempt_transition
from portal_lib.queueing import queue_on_commit
from projects.models import Quota

logger = logging.getLogger(__name__)

# The submission task (jobs.services names it too; services import this module).
SUBMIT_ATTEMPT = "jobs.tasks.submit_attempt"
# A line longer than this is released over several beats (each release is a transaction).
MAX_RELEASES = 100


def wait_reason(why: str) -> str:
    """The reason a waiting attempt shows: why, and what happens next."""
    return f"Waiting for room: {why}. It goes to Slurm when a job of the project ends."


def waiting_attempts(*, project_id: int) -> QuerySet[Attempt]:
    """The project's line, first come first served: the oldest attempt first."""
    return Attempt.objects.filter(job__project_id=project_id, state=State.WAITING).order_by("id")


@dataclass(frozen=True)
class Place:
    """Where a waiting attempt stands in its project's line: `number` of `length` (1 is next)."""

    number: int
    length: int
    project: str

    @property
    def words(self) -> str:
        if self.number == 1:
            return f"Next in project {self.project}'s line ({self.length} waiting)."
        return f"Place {self.number} of {self.length} in project {self.project}'s line."


def line_places(attempts: Iterable[Attempt]) -> dict[int, Place]:
    """Each waiting attempt's place (by attempt id), one query per project in the list."""
    projects: dict[int, str] = {}
    wanted = set()
    for attempt in attempts:
        if attempt.state == State.WAITING:
            wanted.add(attempt.pk)
            projects[attempt.job.project_id] = attempt.job.project.slug
    places: dict[int, Place] = {}
    for project_id, slug in projects.items():
        line = list(waiting_attempts(project_id=project_id).values_list("id", flat=True))
        for number, attempt_id in enumerate(line, start=1):
            if attempt_id in wanted:
                places[attempt_id] = Place(number=number, length=len(line), project=slug)
    return places


@dataclass(frozen=True)
class Waiting:
    """What a waiting job shows: its place in the line and why it waits, in plain words."""

    place: Place
    reason: str


def jobs_waiting(jobs: Iterable[Job]) -> dict[int, Waiting]:
    """Each waiting job's place and reason (by job id): a query, and one per project."""
    ids = [job.pk for job in jobs if job.state == State.WAITING]
    if not ids:
        return {}
    attempts = list(
        Attempt.objects.filter(job_id__in=ids, state=State.WAITING).select_related("job__project")
    )
    places = line_places(attempts)
    return {
        attempt.job_id: Waiting(place=places[attempt.pk], reason=attempt.reason)
        for attempt in attempts
        if attempt.pk in places
    }


def line_release(*, project_id: int) -> list[int]:
    """Hand the project's waiting jobs that fit now to the submission, in order.

    Returns the attempts released. Stops at the first that does not fit (first come,
    first served); one refused for another rule meanwhile (a budget spent) fails with
    the refusal and the next is looked at.
    """
    released: list[int] = []
    if not waiting_attempts(project_id=project_id).exists():
        return released  # most ends: nobody waits, and the quota lock is not taken
    for _ in range(MAX_RELEASES):
        with transaction.atomic():
            outcome = _release_head(project_id)
        if outcome is None:
            break
        if outcome:
            released.append(outcome)
    if released:
        logger.info("project %s: released %s from its line", project_id, released)
    return released


def _release_head(project_id: int) -> int | None:
    """Release the head of the line: its id, 0 when it failed, None when nothing moved."""
    # The lock every reservation takes: one submission or release per project at a time.
    Quota.objects.select_for_update().filter(project_id=project_id).first()
    # A head being cancelled (its row locked, and waiting for this lock) is passed over.
    head = (
        waiting_attempts(project_id=project_id)
        .select_for_update(skip_locked=True, of=("self",))
        .select_related("job", "job__project")
        .first()
    )
    if head is None:
        return None
    try:
        with transaction.atomic():
            attempt_reserve(attempt=head)
    except RoomFull as exc:
        reason = wait_reason(exc.message)
        if reason != head.reason:
            Attempt.objects.filter(pk=head.pk).update(reason=reason)
        return None
    except JobError as exc:
        attempt_transition(
            attempt=head, to=State.FAILED, reason=f"Could not leave the line: {exc.message}"
        )
        return 0
    attempt_transition(
        attempt=head,
        to=State.QUEUED,
        reason=f"Room in project {head.job.project.slug}: left the line for Slurm.",
    )
    queue_on_commit(SUBMIT_ATTEMPT, head.pk, redriven=True)
    return head.pk


def lines_release() -> int:
    """The backstop: release every project's line that has a waiting job (the beat)."""
    projects = (
        Attempt.objects.filter(state=State.WAITING)
        .values_list("job__project_id", flat=True)
        .distinct()
    )
    return sum(len(line_release(project_id=project_id)) for project_id in list(projects))
