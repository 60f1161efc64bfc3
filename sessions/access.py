"""Who may open a session: its owner, while a member of its project and signed in; staff
too where SESSION_STAFF_MAY_OPEN says. The one place for this rule (pages, proxy, sockets)."""

from importlib import import_module

from django.conf import settings
from django.contrib.auth import get_user_model

from jobs.enums import Template
from jobs.models import Job
from portal_lib.viewers import Viewer, sees_everything, signed_in
from projects.access import member_of


def session_for_opener(*, user: Viewer | None, job_id: int) -> Job | None:
    """The session job, or None when it is missing, no session, or not the user's to open."""
    if not signed_in(user):
        return None
    jobs = Job.objects.select_related("cluster").filter(pk=job_id, template=Template.JUPYTER)
    if not (settings.SESSION_STAFF_MAY_OPEN and sees_everything(user)):
        jobs = jobs.filter(member_of(user=user, project_ref="project_id"), user_id=user.pk)
    return jobs.first()


def session_for_owner(*, user: Viewer | None, job_id: int) -> Job | None:
    """The session job, if it is the user's own while a member of its project (no staff
    policy: what a run takes from a session's directory is its owner's to give)."""
    if not signed_in(user):
        return None
    jobs = Job.objects.select_related("cluster", "project").filter(
        member_of(user=user, project_ref="project_id"),
        pk=job_id,
        template=Template.JUPYTER,
        user_id=user.pk,
    )
    return jobs.first()


def may_open(*, user: Viewer | None, job: Job) -> bool:
    """Whether the job page offers its Open button (no query beyond what it holds)."""
    if not signed_in(user) or job.template != Template.JUPYTER:
        return False
    return job.user_id == user.pk or (settings.SESSION_STAFF_MAY_OPEN and sees_everything(user))


def opener_may_continue(*, user_id: int, session_key: str | None, job_id: int) -> bool:
    """An open socket's check: the browser session still there (no logout) and still allowed."""
    user = get_user_model().objects.filter(pk=user_id, is_active=True).first()
    if user is None or not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not store().exists(session_key):
        return False
    return session_for_opener(user=user, job_id=job_id) is not None
