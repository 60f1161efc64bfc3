"""A request body past REQUEST_BODY_MAX_BYTES is refused before Django reads it.

Before: Django's ASGI handler spooled any body, of any size and from anyone (no login
needed), to a temporary file before a view ran; the 100 MiB upload cap was checked only
after that, in the view.
"""

import asyncio
import json
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.testing import ApplicationCommunicator

from portal.asgi import application

UPLOAD = "/api/v1/projects/vision/code/"
MIB = 1024 * 1024


def _scope(path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"host", b"testserver"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }


def _post(path: str, chunks: list[bytes], headers: list[tuple[bytes, bytes]]) -> tuple[int, bytes]:
    """The status and body the whole ASGI application answers with."""

    async def run() -> tuple[int, bytes]:
        communicator = ApplicationCommunicator(application, _scope(path, headers))
        for n, chunk in enumerate(chunks):
            more = n < len(chunks) - 1
            await communicator.send_input(
                {"type": "http.request", "body": chunk, "more_body": more}
            )
        start = await communicator.receive_output(timeout=10)
        body = await communicator.receive_output(timeout=10)
        await communicator.wait(timeout=10)
        return start["status"], body["body"]

    return asyncio.run(run())


def test_a_declared_length_over_the_cap_is_refused_unread(settings) -> None:
    settings.REQUEST_BODY_MAX_BYTES = MIB
    status, body = _post(UPLOAD, [b""], [(b"content-length", str(MIB + 1).encode())])
    assert status == 413
    assert json.loads(body) == {
        "detail": "The request is over the cap of 1.0 MiB; send a smaller archive "
        "(leave data and checkpoints out of it)."
    }


def test_a_body_that_grows_past_the_cap_is_refused_as_it_comes(settings) -> None:
    settings.REQUEST_BODY_MAX_BYTES = MIB
    chunks = [b"x" * (256 * 1024)] * 5  # no length declared: counted as it arrives
    status, body = _post(UPLOAD, chunks, [(b"content-type", b"multipart/form-data; boundary=b")])
    assert status == 413 and b"over the cap of 1.0 MiB" in body
    # A page's answer is text.
    status, body = _post("/jobs/new/", chunks, [])
    assert status == 413 and body.startswith(b"The request is over the cap")


def test_a_body_under_the_cap_reaches_the_portal(settings) -> None:
    settings.REQUEST_BODY_MAX_BYTES = MIB
    chunks = [b"x" * (256 * 1024)] * 3
    status, _ = _post(UPLOAD, chunks, [(b"content-length", str(3 * 256 * 1024).encode())])
    assert status == 401  # Django's answer: no credentials


@pytest.mark.parametrize("length", ["9" * 30, "9" * 5000, "0" * 40 + "12"])
def test_odd_lengths_cost_nothing(settings, length: str) -> None:
    settings.REQUEST_BODY_MAX_BYTES = MIB
    status, _ = _post(UPLOAD, [b"x" * 12], [(b"content-length", length.encode())])
    assert status == (401 if length.endswith("12") else 413)


def test_daphne_answers_a_body_past_the_cap_without_django(asgi_server: str) -> None:
    """The real server at its default cap (the 100 MiB archive and 1 MiB of form): Django
    neither spools nor parses the body (before: a 401 after both). Daphne itself buffers
    a body before the application sees it; in production the proxy caps it first."""
    address = urlsplit(asgi_server)
    size = 102 * MIB
    with socket.create_connection((address.hostname, address.port), timeout=60) as conn:
        conn.sendall(
            f"POST {UPLOAD} HTTP/1.1\r\nHost: {address.netloc}\r\n"
            # Not multipart: Twisted would parse that itself, and answer 400 to this body.
            "Content-Type: application/octet-stream\r\n"
            f"Content-Length: {size}\r\nConnection: close\r\n\r\n".encode()
        )
        block = b"x" * MIB
        for _ in range(size // MIB):
            conn.sendall(block)
        answer = b""
        while part := conn.recv(65536):
            answer += part
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"over the cap of 101.0 MiB" in answer


def test_the_production_proxy_caps_a_body_as_the_portal_does(settings) -> None:
    caddyfile = (Path(settings.BASE_DIR) / "deploy" / "caddy" / "Caddyfile").read_text()
    assert "request_body {\n\t\tmax_size 101MiB\n\t}" in caddyfile
    assert settings.REQUEST_BODY_MAX_BYTES == 101 * MIB


def test_daphne_hands_a_multipart_body_on_unparsed(asgi_server: str) -> None:
    """Twisted parsed multipart and form bodies itself, in daphne's one event loop, before
    any login (a 5 MiB anonymous POST of small parts held every other request 5 s). A
    body it cannot parse shows who reads it: Twisted answered a bare 400, the portal a 401."""
    address = urlsplit(asgi_server)
    body = b"not a multipart body"
    with socket.create_connection((address.hostname, address.port), timeout=60) as conn:
        conn.sendall(
            f"POST {UPLOAD} HTTP/1.1\r\nHost: {address.netloc}\r\n"
            "Content-Type: multipart/form-data; boundary=b\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        answer = b""
        while part := conn.recv(65536):
            answer += part
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert answer.endswith(b'{"detail":"Authentication credentials were not provided."}')
