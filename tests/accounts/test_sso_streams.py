"""A single sign-on session's log-out ends its live streams, as a password session's does.

The WebSocket runs in a real daphne on the test database and the real Redis channel
layer; the person signed in through the tests' OpenID provider, and logs out here.
"""

import asyncio
import json

import pytest
import websockets
from asgiref.sync import async_to_sync
from django.conf import settings
from django.test import Client

from devtools.ldap_server import PASSWORDS
from devtools.openid_provider import OpenIDProvider
from monitoring.live import slots as stream_slots
from projects.models import Project
from tests import factories
from tests.accounts.sso_flow import sign_in, signed_in_as
from web.live.consumers import CLOSE_ACCESS_ENDED

pytestmark = pytest.mark.django_db(transaction=True)

TIMEOUT = 30  # generous on a busy machine; a socket that outlives the session fails on it


def test_log_out_of_an_sso_session_closes_its_websocket(
    asgi_server: str, oidc_on: OpenIDProvider, project: Project
) -> None:
    client = Client()
    sign_in(client, "alice", PASSWORDS["alice"])
    alice = signed_in_as(client)
    assert alice is not None
    job, _ = factories.job(project, alice, factories.cluster())  # vision: ml-team's project
    session = client.cookies[settings.SESSION_COOKIE_NAME].value
    stream_slots.slots_clear(kind="ws", user_id=alice.pk)

    async def scenario() -> tuple[str, int, str]:
        url = asgi_server.replace("http://", "ws://") + f"/ws/jobs/{job.pk}/"
        async with websockets.connect(
            url,
            origin=websockets.Origin(asgi_server),
            additional_headers={"Cookie": f"{settings.SESSION_COOKIE_NAME}={session}"},
            open_timeout=TIMEOUT,
        ) as ws:
            hello = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            out = await asyncio.to_thread(client.post, "/logout/")
            try:
                while True:  # deltas may come first; the close must come
                    await asyncio.wait_for(ws.recv(), TIMEOUT)
            except websockets.ConnectionClosed as closed:
                assert closed.rcvd is not None
                return hello["event"], closed.rcvd.code, out["Location"]

    event, code, location = async_to_sync(scenario)()
    assert (event, code) == ("hello", CLOSE_ACCESS_ENDED)
    assert location.startswith(f"{oidc_on.issuer}/session/end?")
    stream_slots.slots_clear(kind="ws", user_id=alice.pk)
