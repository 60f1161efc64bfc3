"""jobs.access and projects.access: the one place for who may see, submit and cancel.

Six personas: the project's owner, a member, a viewer, an outsider, staff (in no
project: the staff rule lets them see everything and do nothing), and a visitor.
"""

import pytest
from django.contrib.auth.models import AnonymousUser, User

from jobs.access import (
    attempt_for_viewer,
    can_cancel,
    can_submit,
    can_view_job,
    job_for_viewer,
    jobs_visible_to,
    require_canceller,
    require_submitter,
)
from jobs.errors import JobPermissionRefused
from jobs.models import Attempt, Job
from projects.access import clusters_for_user, in_any_project, projects_visible_to
from projects.models import Membership, Project
from tests import factories

PERSONAS = ("owner", "member", "viewer", "outsider", "staff", "anonymous")
# persona -> (sees the job, may submit in its project, may cancel a job someone else submitted)
EXPECTED = {
    "owner": (True, True, True),
    "member": (True, True, False),
    "viewer": (True, False, False),
    "outsider": (False, False, False),
    "staff": (True, False, False),
    "anonymous": (False, False, False),
}


@pytest.fixture
def anonymous() -> AnonymousUser:
    return AnonymousUser()


@pytest.fixture
def others_job(project: Project, django_user_model: type[User]) -> tuple[Job, Attempt]:
    """A job submitted by another member: nobody among the personas submitted it."""
    submitter = django_user_model.objects.create_user(username="sam")
    Membership.objects.create(user=submitter, project=project, role=Membership.Role.MEMBER)
    return factories.job(project, submitter, factories.cluster())


@pytest.mark.parametrize("persona", PERSONAS)
def test_each_persona_sees_submits_and_cancels_as_the_rules_say(
    request: pytest.FixtureRequest, others_job: tuple[Job, Attempt], persona: str
) -> None:
    job, attempt = others_job
    user = request.getfixturevalue(persona)
    sees, submits, cancels = EXPECTED[persona]
    assert can_view_job(user=user, job=job) is sees
    assert (job_for_viewer(user=user, job_id=job.pk) is not None) is sees
    assert jobs_visible_to(user=user).filter(pk=job.pk).exists() is sees
    assert (attempt_for_viewer(user=user, job_id=job.pk, number=1) == attempt) is sees
    assert can_submit(user=user, project=job.project) is submits
    assert can_cancel(user=user, job=job) is cancels
    assert projects_visible_to(user=user).filter(pk=job.project_id).exists() is sees
    assert in_any_project(user=user) is sees
    assert clusters_for_user(user=user).filter(pk=job.cluster_id).exists() is sees


@pytest.mark.parametrize("persona", PERSONAS)
def test_refusals_say_who_may(
    request: pytest.FixtureRequest, others_job: tuple[Job, Attempt], persona: str
) -> None:
    job, _ = others_job
    user = request.getfixturevalue(persona)
    _, submits, cancels = EXPECTED[persona]
    if submits:
        require_submitter(user=user, project=job.project)
    else:
        with pytest.raises(JobPermissionRefused, match="ask one of its owners") as refused:
            require_submitter(user=user, project=job.project)
        assert refused.value.status == 403
    if cancels:
        require_canceller(user=user, job=job)
    else:
        with pytest.raises(JobPermissionRefused, match="submitter or a project owner"):
            require_canceller(user=user, job=job)


def test_the_submitter_may_cancel_their_own_job(project: Project, member: User) -> None:
    job, _ = factories.job(project, member, factories.cluster())
    assert can_cancel(user=member, job=job)
    # A list page passes the projects it knows the user owns instead of a query per row.
    assert can_cancel(user=member, job=job, owner_of=frozenset())


def test_owner_of_spares_the_query(
    project: Project, owner: User, others_job: tuple[Job, Attempt], django_assert_num_queries
) -> None:
    job, _ = others_job
    with django_assert_num_queries(0):
        assert can_cancel(user=owner, job=job, owner_of={project.pk})
        assert not can_cancel(user=owner, job=job, owner_of=set())


def test_staff_sees_every_job_a_member_only_their_projects(
    project: Project, member: User, staff: User
) -> None:
    other = Project.objects.create(slug="speech", name="Speech")
    cluster = factories.cluster()
    mine, _ = factories.job(project, member, cluster)
    theirs, _ = factories.job(other, staff, cluster)
    assert set(jobs_visible_to(user=member)) == {mine}
    assert set(jobs_visible_to(user=staff)) == {mine, theirs}
    assert not jobs_visible_to(user=AnonymousUser()).exists()
