"""A JupyterLab session on the sandbox for the session tests (issue 39): submitted as a job,
then driven through the portal's proxy as its signed-in owner's browser drives it (HTTP and
the kernel's WebSocket over the owner's SSH login), never around it."""

import json
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from playwright.sync_api import Error as PlaywrightError
from websockets.sync.client import connect

from clusters.models import Cluster
from jobs.enums import Template
from jobs.interactive import lab_base_url
from jobs.models import Job
from jobs.services import job_submit
from projects.models import Project
from tests.factories import spec
from tests.helpers import session_cookie

ANSWER_TIMEOUT = 60  # seconds for one answer of the server, through the portal


def open_button_shown(page: Any) -> bool:
    """The session's Open button, on a fresh load of its job page (a load that the page's
    own refresh cuts short is tried again at the next look)."""
    try:
        page.reload()
    except PlaywrightError:
        return False
    return page.locator("#session-open").count() > 0


def session_submit(
    *, user: User, project: Project, cluster: Cluster, name: str, time_limit: timedelta
) -> Job:
    """A JupyterLab session whose notebooks live in its run directory (removed after the
    test), not in the user's home."""
    return job_submit(
        user=user,
        project=project,
        cluster=cluster,
        spec=spec(
            name=name,
            template=Template.JUPYTER,
            command="jupyter lab",
            setup='cd -- "$PORTAL_RUN_DIR"',
            time_limit=time_limit,
        ),
    )


class Lab:
    """A session's JupyterLab through the portal at `server`, as `user` signed in there."""

    def __init__(self, server: str, job: Job, user: User) -> None:
        self.url = f"{server}{lab_base_url(job.pk)}"
        cookie = f"{settings.SESSION_COOKIE_NAME}={session_cookie(user)}"
        # The proxy takes writes only from the portal's own origin.
        self.headers = {"Cookie": cookie, "Origin": server}

    def call(self, method: str, path: str, body: object = None) -> tuple[int, Any]:
        """(status, parsed JSON answer or None) of one request; status 0 when unreachable."""
        data = None if body is None else json.dumps(body).encode()
        headers = {**self.headers, **({"Content-Type": "application/json"} if data else {})}
        request = urllib.request.Request(  # noqa: S310 - the test's own portal
            f"{self.url}{path}", data=data, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=ANSWER_TIMEOUT) as answer:  # noqa: S310
                raw = answer.read()
                return answer.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as refused:
            return refused.code, None
        except OSError:
            return 0, None

    def answers(self) -> bool:
        """The server answers through the portal (not the proxy's "starting" page)."""
        return self.call("GET", "api/status")[0] == 200

    def kernels(self) -> list[dict[str, Any]]:
        status, kernels = self.call("GET", "api/kernels")
        assert status == 200, status
        return kernels

    def notebook_save(self, path: str) -> None:
        """Save an empty notebook as the browser's save does (the contents API)."""
        notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        status, _ = self.call(
            "PUT", f"api/contents/{path}", {"type": "notebook", "content": notebook}
        )
        assert status in (200, 201), status

    def kernel_start(self) -> str:
        status, kernel = self.call("POST", "api/kernels", {})
        assert status == 201, status
        return kernel["id"]

    def execute(self, kernel: str, code: str) -> None:
        """Send `code` to the kernel over its WebSocket and return once the kernel is busy
        with it; the cell goes on running after the socket closes, as after a closed tab."""
        socket_url = self.url.replace("http", "ws", 1) + f"api/kernels/{kernel}/channels"
        msg_id = uuid.uuid4().hex
        request = {
            "header": {
                "msg_id": msg_id,
                "msg_type": "execute_request",
                "session": uuid.uuid4().hex,
                "username": "e2e",
                "date": "",
                "version": "5.3",
            },
            "parent_header": {},
            "metadata": {},
            "content": {"code": code, "silent": False, "store_history": True},
            "channel": "shell",
            "buffers": [],
        }
        with connect(
            socket_url, additional_headers=self.headers, open_timeout=ANSWER_TIMEOUT
        ) as socket:
            socket.send(json.dumps(request))
            while True:
                message = json.loads(socket.recv(timeout=ANSWER_TIMEOUT))
                if (
                    message.get("parent_header", {}).get("msg_id") == msg_id
                    and message.get("msg_type") == "execute_input"
                ):
                    return
