"""The portal's notices inside JupyterLab's page (sessions.notice): what they say, who may
read them, and the script the proxy adds to JupyterLab's real page."""

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.models import AttemptActivity
from sessions.notice import session_notices, with_notice_script
from tests import factories

LAB_PAGE = Path(__file__).parent / "fixtures" / "jupyterlab-4.6.6-lab.html"
NOW = datetime(2026, 12, 7, 10, 0, tzinfo=UTC)


@pytest.fixture
def session(project, owner, cluster) -> tuple[Job, Attempt]:
    job, attempt = factories.session(project, owner, cluster, time_limit=timedelta(hours=2))
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, started_at=NOW - timedelta(minutes=30)
    )
    return job, attempt


def _texts(job: Job, now: datetime = NOW) -> list[str]:
    return [n.text for n in session_notices(job=job, now=now)]


def test_a_busy_session_far_from_its_limit_has_nothing_to_say(session) -> None:
    job, attempt = session
    assert _texts(job) == []
    AttemptActivity.objects.create(attempt=attempt, idle_since_x=1.0, idle_last_x=90.0)
    assert _texts(job) == []  # idle for a while, not warned (yet): nothing


def test_a_warned_session_says_when_the_portal_stops_it(session) -> None:
    job, attempt = session
    AttemptActivity.objects.create(
        attempt=attempt, warned_at=NOW, cancel_at=NOW + timedelta(minutes=20, seconds=5)
    )
    (text,) = _texts(job)
    assert "no kernel has run anything" in text
    assert "stops the session at 10:20 UTC unless a cell runs or its GPUs get busy" in text
    assert "save your notebooks now" in text
    # A policy that warns only: no stop to announce, the charge instead.
    AttemptActivity.objects.filter(attempt=attempt).update(cancel_at=None)
    (text,) = _texts(job)
    assert "charged while they wait" in text and "stops" not in text
    # Once cancelled (the session ends), and for a session that no longer runs: nothing.
    AttemptActivity.objects.filter(attempt=attempt).update(cancelled_at=NOW)
    assert _texts(job) == []


def test_the_time_limit_is_announced_in_its_last_quarter_hour(session) -> None:
    job, _ = session  # started 9:30, two hours: ends 11:30
    assert _texts(job, NOW + timedelta(minutes=74)) == []
    (text,) = _texts(job, NOW + timedelta(minutes=76))
    assert text.startswith("This session reaches its time limit at 11:30 UTC (in 14 min)")


def test_a_session_that_does_not_run_has_no_notices(session) -> None:
    job, attempt = session
    AttemptActivity.objects.create(attempt=attempt, warned_at=NOW, cancel_at=NOW)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.CANCELLED)
    assert _texts(job, NOW + timedelta(hours=3)) == []


def _client(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def test_only_whoever_opens_the_session_reads_its_notices(
    session, owner, member, viewer, outsider, staff, settings
) -> None:
    job, attempt = session
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now())
    AttemptActivity.objects.create(
        attempt=attempt, warned_at=timezone.now(), cancel_at=timezone.now()
    )
    url = f"/sessions/{job.pk}/notice.json"
    answer = _client(owner).get(url)
    assert answer.status_code == 200 and answer["Cache-Control"] == "no-store"
    assert [n["kind"] for n in answer.json()["notices"]] == ["idle"]
    for other in (member, viewer, outsider, staff):
        assert _client(other).get(url).status_code == 404, other.username
    settings.SESSION_STAFF_MAY_OPEN = True
    assert _client(staff).get(url).status_code == 200
    # Signed out (the page stays open after a logout): refused, saying what to do.
    refused = _client().get(url)
    assert refused.status_code == 403 and "Sign in" in refused.json()["detail"]
    assert _client(owner).post(url).status_code == 405


def test_a_job_that_is_no_session_has_no_notices(project, owner, cluster) -> None:
    job, _ = factories.job(project, owner, cluster)
    assert _client(owner).get(f"/sessions/{job.pk}/notice.json").status_code == 404


def test_the_script_goes_into_jupyterlabs_real_page_before_its_head_ends() -> None:
    page = LAB_PAGE.read_bytes()
    added = with_notice_script(page, 5)
    tag = (
        b'<script src="/static/js/session-notice.js" data-notice="/sessions/5/notice.json"'
        b' data-every="20" defer></script>'
    )
    assert added.count(tag) == 1
    assert added.index(tag) < added.index(b"</head>") < added.index(b"<body")
    assert added.replace(tag, b"") == page  # nothing else changes
    assert with_notice_script(b'{"not": "a page"}', 5) == b'{"not": "a page"}'
    headless = b"<!doctype html><html><body>x</body></html>"
    assert with_notice_script(headless, 5) == headless + tag
