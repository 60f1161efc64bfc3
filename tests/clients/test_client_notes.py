"""The Python client's Job.annotate: a run's note, tags and group, written and read back."""

import pytest
from portal_client import Portal, PortalError

from jobs.models import Job
from tests.clients.test_client import _portal, portal, same_connection  # noqa: F401  (fixtures)
from tests.helpers import Tokens

pytestmark = pytest.mark.usefixtures("service_account")


def test_annotate_writes_and_the_job_reads_them_back(portal: Portal, job: Job) -> None:  # noqa: F811
    handle = portal.job(job.pk)
    assert (handle.note, handle.tags, handle.group) == ("", [], "")
    assert handle.annotate(note="the run that mattered", tags=["Best", "lr-3e-4"]) is handle
    assert (handle.note, handle.tags, handle.group) == (
        "the run that mattered",
        ["best", "lr-3e-4"],
        "",
    )
    handle.annotate(group="seeds")  # the others stay
    again = portal.job(job.pk)
    assert (again.note, again.tags, again.group) == (
        "the run that mattered",
        ["best", "lr-3e-4"],
        "seeds",
    )
    stored = Job.objects.get(pk=job.pk)
    assert (stored.tags, stored.group) == (["best", "lr-3e-4"], "seeds")


def test_a_refused_tag_raises_naming_the_field(portal: Portal, job: Job) -> None:  # noqa: F811
    with pytest.raises(PortalError) as refused:
        portal.job(job.pk).annotate(tags=["has space"])
    assert refused.value.status == 400
    assert "tags" in refused.value.errors and "use only letters" in str(refused.value)
    assert Job.objects.get(pk=job.pk).tags == []


def test_a_member_who_did_not_submit_it_may_read_but_not_annotate(
    tokens: Tokens,
    job: Job,
    same_connection: None,  # noqa: F811
) -> None:
    member = _portal(tokens.member)
    assert member.job(job.pk).tags == []
    with pytest.raises(PortalError) as refused:
        member.job(job.pk).annotate(note="mine")
    assert refused.value.status == 403
    assert Job.objects.get(pk=job.pk).note == ""
