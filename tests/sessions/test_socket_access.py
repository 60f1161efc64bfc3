"""A session's WebSockets through the real ASGI stack: refused at the handshake to anyone
who may not open the session, and to its owner while it does not run."""

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.conf import settings
from django.contrib.auth.models import User

from jobs.enums import Template
from jobs.models import Job
from portal.asgi import application
from tests import factories
from tests.helpers import session_cookie
from web.live.consumers import CLOSE_FORBIDDEN
from web.sessions.consumers import CLOSE_UNAVAILABLE

pytestmark = pytest.mark.django_db(transaction=True)

HOST = (b"host", b"127.0.0.1")
ORIGIN = (b"origin", b"http://127.0.0.1")
TIMEOUT = 30


def _refusal(job: Job, user: User | None) -> Any:
    headers = [HOST, ORIGIN]
    if user is not None:
        cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookie(user)}".encode()
        headers.append((b"cookie", cookie))
    path = f"/sessions/{job.pk}/lab/api/kernels/k/channels"

    async def scenario() -> Any:
        communicator = WebsocketCommunicator(application, path, headers=headers)
        try:
            return await communicator.connect(timeout=TIMEOUT)
        finally:
            await communicator.disconnect(timeout=TIMEOUT)

    return async_to_sync(scenario)()


@pytest.fixture
def session(project, owner, cluster) -> Job:
    job, _ = factories.job(
        project, owner, cluster, name="lab", template=Template.JUPYTER, command="jupyter lab"
    )
    return job


def test_no_one_but_the_owner_gets_past_the_handshake(
    session, owner, member, outsider, staff
) -> None:
    for user in (None, member, outsider, staff):
        assert _refusal(session, user) == (False, CLOSE_FORBIDDEN)
    # The owner is let in, and meets the session's state: not running, no server to reach.
    assert _refusal(session, owner) == (False, CLOSE_UNAVAILABLE)
