"""Who may see, submit and cancel jobs: the one place for these rules.

Seeing follows the project (any role) and the staff rule (`portal_lib.viewers`);
submitting needs the owner or member role; cancelling, and writing the run's
note, tags and group, are for the job's submitter and the project's owners.
"""

from collections.abc import Collection

from django.db.models import QuerySet

from jobs.errors import JobPermissionRefused
from jobs.models import Attempt, CodeSnapshot, Job
from portal_lib.viewers import Viewer, sees_everything, signed_in
from projects.access import can_submit_in, member_of, membership, owns
from projects.models import Project


def jobs_visible_to(*, user: Viewer | None) -> QuerySet[Job]:
    """Jobs of the user's projects (any role); every job for staff; none for visitors."""
    if not signed_in(user):
        return Job.objects.none()
    if sees_everything(user):
        return Job.objects.all()
    return Job.objects.filter(member_of(user=user, project_ref="project_id"))


def code_snapshots_visible_to(*, user: Viewer | None) -> QuerySet[CodeSnapshot]:
    """Code snapshots follow their project like its jobs: any role, staff, never visitors."""
    if not signed_in(user):
        return CodeSnapshot.objects.none()
    if sees_everything(user):
        return CodeSnapshot.objects.all()
    return CodeSnapshot.objects.filter(member_of(user=user, project_ref="project_id"))


def can_view_job(*, user: Viewer | None, job: Job) -> bool:
    """One query for a member; none for staff and visitors."""
    if not signed_in(user):
        return False
    return sees_everything(user) or membership(user=user, project_id=job.project_id) is not None


def job_for_viewer(*, user: Viewer | None, job_id: int) -> Job | None:
    """The job with what its page shows, or None when it is missing or not the user's to see."""
    return (
        jobs_visible_to(user=user)
        .select_related("project", "cluster", "user", "code")
        .filter(pk=job_id)
    ).first()


def attempt_for_viewer(*, user: Viewer | None, job_id: int, number: int) -> Attempt | None:
    """One attempt of a job the user may see, with its job, in one query."""
    if not signed_in(user):
        return None
    attempts = Attempt.objects.select_related("job").filter(job_id=job_id, number=number)
    if not sees_everything(user):
        attempts = attempts.filter(member_of(user=user, project_ref="job__project_id"))
    return attempts.first()


def can_submit(*, user: Viewer | None, project: Project) -> bool:
    return can_submit_in(user=user, project_id=project.pk)


def require_submitter(*, user: Viewer | None, project: Project) -> None:
    if not can_submit(user=user, project=project):
        raise JobPermissionRefused(
            f"You cannot submit jobs in project {project.slug}: ask one of its owners to "
            "add you as a member."
        )


def can_cancel(*, user: Viewer | None, job: Job, owner_of: Collection[int] | None = None) -> bool:
    """The job's submitter or an owner of its project (`owner_of`: the ids, if known)."""
    if not signed_in(user):
        return False
    if job.user_id == user.pk:
        return True
    if owner_of is not None:
        return job.project_id in owner_of
    return owns(user=user, project_id=job.project_id)


def require_canceller(*, user: Viewer | None, job: Job) -> None:
    if not can_cancel(user=user, job=job):
        raise JobPermissionRefused("Only the job's submitter or a project owner can cancel it.")


def can_annotate(*, user: Viewer | None, job: Job) -> bool:
    """Who may write the run's note, tags and group: whoever may cancel it."""
    return can_cancel(user=user, job=job)


def require_annotator(*, user: Viewer | None, job: Job) -> None:
    if not can_annotate(user=user, job=job):
        raise JobPermissionRefused(
            "Only the job's submitter or a project owner can change its note, tags and group."
        )
