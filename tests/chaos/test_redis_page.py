"""An open job page's WebSocket across a Redis kill -9 and an empty restart.

Redis holds the page's channel, its group, its stream slot and its open-page lease; a
restart loses them all. The socket must end with a code the page retries (not 4401 or
4403, after which `static/js/job.js` gives up), be let in again once Redis is back, and
carry the polls' deltas again; the page's hello then reads what was stored meanwhile
(`tests/browser/test_job_page_reconnect.py` shows that refill in Chromium).
"""

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
import websockets
from asgiref.sync import async_to_sync
from channels_redis.core import RedisChannelLayer
from django.conf import settings
from django.contrib.auth.models import User

from devtools.servers import Daphne
from jobs.rundir import job_group
from projects.models import Project
from tests import factories
from tests.fixtures.servers import live_env
from tests.helpers import session_cookie
from tests.throwaway import ThrowawayRedis
from web.live.consumers import CLOSE_ACCESS_ENDED, CLOSE_FORBIDDEN

pytestmark = pytest.mark.django_db(transaction=True)

OUTAGE = 3.0
TIMEOUT = 60.0  # generous on a busy machine; the recovery time is printed


def test_an_open_page_is_let_in_again_and_fed_after_redis_restarts_empty(
    project: Project, member: User, tmp_path: Path, chaos_report: Any
) -> None:
    job, _ = factories.job(project, member, factories.cluster())
    cookie = {"Cookie": f"{settings.SESSION_COOKIE_NAME}={session_cookie(member)}"}
    redis_server = ThrowawayRedis()
    env = {**live_env(), "REDIS_URL": redis_server.url, "CELERY_BROKER_URL": redis_server.url}
    server = Daphne(env, tmp_path, name="daphne-redis-restart")
    url = server.url.replace("http://", "ws://") + f"/ws/jobs/{job.pk}/"
    layer = RedisChannelLayer(hosts=[redis_server.url])  # what a poll sends through

    async def open_socket() -> Any:
        socket = await websockets.connect(
            url, origin=websockets.Origin(server.url), additional_headers=cookie, open_timeout=10
        )
        assert json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))["event"] == "hello"
        return socket

    async def scenario() -> tuple[int | None, float]:
        socket = await open_socket()
        redis_server.kill()
        try:  # the page's socket ends: its channel's read fails
            await asyncio.wait_for(socket.recv(), TIMEOUT)
            code = None
        except websockets.ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd is not None else None
        await asyncio.sleep(OUTAGE)
        await asyncio.to_thread(redis_server.start)
        back = time.monotonic()
        deadline = back + TIMEOUT
        while True:  # the page tries again, about every second
            try:
                socket = await open_socket()
                break
            except (
                OSError,
                TimeoutError,
                websockets.InvalidHandshake,
                websockets.ConnectionClosed,
            ):
                # Refused or dropped while daphne's clients find Redis again: a page retries.
                assert time.monotonic() < deadline, "the page was not let in again"
                await asyncio.sleep(0.5)
        seconds = time.monotonic() - back
        try:
            delta = {
                "type": "job.delta",
                "job": job.pk,
                "attempt": 1,
                "series": {"loss": [[6, 0.5]]},
            }
            await layer.group_send(job_group(job.pk), delta)
            message = json.loads(await asyncio.wait_for(socket.recv(), TIMEOUT))
            assert message["event"] == "delta" and message["series"] == {"loss": [[6, 0.5]]}
        finally:
            await socket.close()
        return code, seconds

    server.start()
    try:
        code, seconds = async_to_sync(scenario)()
    finally:
        server.stop()
        redis_server.kill()
    assert code not in (CLOSE_ACCESS_ENDED, CLOSE_FORBIDDEN), f"the page would give up: {code}"
    chaos_report(
        "redis-kill-restart-open-page",
        seconds,
        f"down {OUTAGE:.0f} s, back empty; the socket closed with {code}, let in again, fed",
    )
