"""Who reaches a session's URLs: its owner only (staff where the policy says), while signed in
and a member; writes only from the portal's own pages; bodies within the cap."""

import re

import pytest
from django.test import Client
from django.utils import timezone

from jobs.enums import State
from jobs.models import Job
from projects.models import Membership
from tests import factories

ORIGIN = "http://testserver"


@pytest.fixture
def session(project, owner, cluster) -> Job:
    job, _ = factories.session(project, owner, cluster)
    return job


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def _lab(job: Job, rest: str = "") -> str:
    return f"/sessions/{job.pk}/lab/{rest}"


def test_only_the_owner_gets_through(session, owner, member, viewer, outsider, staff) -> None:
    # The owner passes every check and meets the session's state: not running yet.
    owners = _client(owner).get(_lab(session, "api/status"))
    assert owners.status_code == 409
    assert b"not running" in owners.content
    for other in (member, viewer, outsider, staff):
        assert _client(other).get(_lab(session)).status_code == 404, other.username
        assert _client(other).get(_lab(session, "api/kernels")).status_code == 404


def test_staff_open_sessions_only_where_the_policy_says(session, staff, settings) -> None:
    settings.SESSION_STAFF_MAY_OPEN = True
    assert _client(staff).get(_lab(session)).status_code == 409


def test_a_visitor_is_sent_to_log_in_and_never_reaches_the_session(session) -> None:
    response = _client().get(_lab(session, "tree"))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert _client().post(_lab(session, "api/kernels"), HTTP_ORIGIN=ORIGIN).status_code == 403


def test_after_logout_the_old_cookie_is_refused(session, owner) -> None:
    client = _client(owner)
    assert client.get(_lab(session)).status_code == 409
    old = client.cookies["sessionid"].value
    client.post("/logout/")
    replay = Client()
    replay.cookies["sessionid"] = old
    assert replay.get(_lab(session)).status_code == 302


def test_a_removed_member_is_refused_at_the_next_request(session, owner, project) -> None:
    client = _client(owner)
    assert client.get(_lab(session)).status_code == 409
    Membership.objects.filter(user=owner, project=project).delete()
    assert client.get(_lab(session)).status_code == 404


def test_a_job_that_is_no_session_has_no_lab(project, owner, cluster) -> None:
    job, _ = factories.job(project, owner, cluster, name="train")
    assert _client(owner).get(_lab(job)).status_code == 404


def test_writes_come_from_the_portals_pages_only(session, owner) -> None:
    client = _client(owner)
    path = _lab(session, "api/kernels")
    assert client.post(path, b"{}", content_type="application/json").status_code == 403
    evil = client.post(
        path, b"{}", content_type="application/json", HTTP_ORIGIN="https://evil.example"
    )
    assert evil.status_code == 403
    same = client.post(path, b"{}", content_type="application/json", HTTP_ORIGIN=ORIGIN)
    assert same.status_code == 409  # through the checks, to the session's state


def test_a_body_over_the_cap_is_refused(session, owner, settings) -> None:
    settings.SESSION_PROXY_BODY_MAX_BYTES = 10
    response = _client(owner).put(
        _lab(session, "api/contents/a.ipynb"),
        b"x" * 11,
        content_type="application/json",
        HTTP_ORIGIN=ORIGIN,
    )
    assert response.status_code == 413


def test_the_job_page_offers_open_to_the_owner_with_the_time_left(session, owner, member) -> None:
    attempt = session.attempts.get()
    attempt.state = State.RUNNING
    attempt.started_at = timezone.now()
    attempt.save()
    page = _client(owner).get(f"/jobs/{session.pk}/").content.decode()
    assert "Open JupyterLab" in page and f'href="/sessions/{session.pk}/lab/"' in page
    assert re.search(r"Time left: <strong>0:0\d:\d\d</strong>", page)  # of a 10-minute limit
    others = _client(member).get(f"/jobs/{session.pk}/").content.decode()
    assert "Open JupyterLab" not in others and "Only the session's owner opens it." in others
