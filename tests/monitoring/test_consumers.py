"""The job WebSocket through the real ASGI stack (origin check, session auth) and Redis."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User

from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.poll.open_pages import jobs_watched
from jobs.poll.push import push_deltas
from monitoring.models import LogFile
from monitoring.series.write import series_append
from portal.asgi import application
from projects.models import Membership, Project
from tests import factories
from tests.helpers import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

ORIGIN = (b"origin", b"http://127.0.0.1")
# The address the socket is opened on: the Origin must name the same scheme, host and port.
HOST = (b"host", b"127.0.0.1")
# Generous: on a busy machine the handshake's queries take seconds. A connect that times
# out leaves the consumer inside a database call, and cancelling it there hangs the loop.
TIMEOUT = 30


def _session_cookie(user: User) -> tuple[bytes, bytes]:
    return b"cookie", f"{settings.SESSION_COOKIE_NAME}={session_cookie(user)}".encode()


def _communicator(job: Job, headers: list[tuple[bytes, bytes]]) -> WebsocketCommunicator:
    return WebsocketCommunicator(application, f"/ws/jobs/{job.pk}/", headers=[HOST, *headers])


@pytest.fixture
def running(project: Project, owner: User) -> tuple[Job, Attempt]:
    job, attempt = factories.job(project, owner, factories.cluster(), state=State.RUNNING)
    Attempt.objects.filter(pk=attempt.pk).update(state=State.RUNNING)
    LogFile.objects.create(attempt=attempt, name="stdout.log", size=1500, first_offset=0)
    series_append(
        points=[(attempt.pk, "loss", 11.0, 0.52), (attempt.pk, "gpu/n1/0/utilization", 1.5e9, 87.0)]
    )
    return job, attempt


def _connect(job: Job, headers: list[tuple[bytes, bytes]]) -> tuple[bool, Any]:
    async def scenario() -> tuple[bool, Any]:
        communicator = _communicator(job, headers)
        try:
            return await communicator.connect(timeout=TIMEOUT)
        finally:
            # Accepted or refused, the consumer ends here, before the event loop closes.
            await communicator.disconnect(timeout=TIMEOUT)

    return async_to_sync(scenario)()


def test_member_gets_hello_then_deltas_and_pong(running: tuple[Job, Attempt], member: User) -> None:
    job, _ = running
    delta = {
        "type": "job.delta",
        "job": job.pk,
        "attempt": 1,
        "state": "RUNNING",
        "log": {"file": "stdout.log", "offset": 1500, "end": 1510, "text": "step 12 ok\n"},
        "series": {"loss": [[12, 0.5]], "gpu/n1/0/utilization": [[1764547200.5, 87.0]]},
    }

    cookie = _session_cookie(member)

    async def scenario() -> list[Any]:
        communicator = _communicator(job, [ORIGIN, cookie])
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        received = [await communicator.receive_json_from(timeout=TIMEOUT)]
        await get_channel_layer().group_send(f"job.{job.pk}", delta)
        received.append(await communicator.receive_json_from(timeout=TIMEOUT))
        await communicator.send_to(text_data="not json")
        await communicator.send_to(bytes_data=b"\x00binary")
        await communicator.send_json_to({"action": "reboot"})
        await communicator.send_json_to({"action": "ping"})
        received.append(await communicator.receive_json_from(timeout=TIMEOUT))
        assert await communicator.receive_nothing()
        await communicator.disconnect(timeout=TIMEOUT)
        return received

    hello, relayed, pong = async_to_sync(scenario)()

    assert hello == {
        "event": "hello",
        "job": job.pk,
        "state": "RUNNING",
        "attempts": [
            {
                "attempt": 1,
                "state": "RUNNING",
                "log_sizes": {"stdout.log": 1500},
                "series_last_x": {"loss": 11, "gpu/n1/0/utilization": 1.5e9},
            }
        ],
    }
    assert relayed == {"event": "delta", **{k: v for k, v in delta.items() if k != "type"}}
    assert pong == {"event": "pong"}


def test_viewer_role_is_allowed(
    running: tuple[Job, Attempt], django_user_model: type[User]
) -> None:
    job, _ = running
    viewer = django_user_model.objects.create_user(username="vera")
    Membership.objects.create(user=viewer, project=job.project, role=Membership.Role.VIEWER)
    assert _connect(job, [ORIGIN, _session_cookie(viewer)]) == (True, None)


def test_staff_is_allowed(running: tuple[Job, Attempt], staff: User) -> None:
    job, _ = running
    assert _connect(job, [ORIGIN, _session_cookie(staff)]) == (True, None)


def test_outsider_is_refused(running: tuple[Job, Attempt], outsider: User) -> None:
    job, _ = running
    assert _connect(job, [ORIGIN, _session_cookie(outsider)]) == (False, 4403)


def test_member_of_another_project_is_refused(
    running: tuple[Job, Attempt], django_user_model: type[User]
) -> None:
    job, _ = running
    elsewhere = Project.objects.create(slug="speech", name="Speech")
    stranger = django_user_model.objects.create_user(username="sam")
    Membership.objects.create(user=stranger, project=elsewhere, role=Membership.Role.OWNER)
    assert _connect(job, [ORIGIN, _session_cookie(stranger)]) == (False, 4403)


def test_anonymous_is_refused(running: tuple[Job, Attempt]) -> None:
    job, _ = running
    assert _connect(job, [ORIGIN]) == (False, 4403)


def test_missing_job_is_refused_like_a_foreign_one(member: User) -> None:
    job = Job(pk=10**9)
    assert _connect(job, [ORIGIN, _session_cookie(member)]) == (False, 4403)


def test_foreign_origin_is_refused_even_for_a_member(
    running: tuple[Job, Attempt], member: User
) -> None:
    job, _ = running
    evil = (b"origin", b"http://evil.example")
    connected, _ = _connect(job, [evil, _session_cookie(member)])
    assert not connected


def test_connect_query_count(
    running: tuple[Job, Attempt], member: User, django_assert_num_queries
) -> None:
    job, _ = running
    cookie = _session_cookie(member)
    # session, user (the auth middleware); the job with the membership check;
    # then the hello: the job's state, its attempts, their log sizes, their series' last x
    with django_assert_num_queries(7):
        assert _connect(job, [ORIGIN, cookie]) == (True, None)


def test_an_open_page_gets_the_polls_deltas_and_a_closed_one_is_no_longer_sent_to(
    running: tuple[Job, Attempt], member: User
) -> None:
    job, _ = running
    delta = {"type": "job.delta", "job": job.pk, "attempt": 1, "state": "RUNNING"}
    cookie = _session_cookie(member)

    async def scenario() -> tuple[bool, Any]:
        communicator = _communicator(job, [ORIGIN, cookie])
        connected, _ = await communicator.connect(timeout=TIMEOUT)
        assert connected
        await communicator.receive_json_from(timeout=TIMEOUT)  # the hello
        watched = job.pk in await database_sync_to_async(jobs_watched)()
        # The poll's own path: open pages are read, then sent to, from a worker thread.
        await database_sync_to_async(push_deltas)([delta])
        relayed = await communicator.receive_json_from(timeout=TIMEOUT)
        await communicator.disconnect(timeout=TIMEOUT)
        return watched, relayed

    watched, relayed = async_to_sync(scenario)()

    assert watched
    assert relayed == {"event": "delta", "job": job.pk, "attempt": 1, "state": "RUNNING"}
    assert job.pk not in (jobs_watched() or set())
