"""The proxy's WebSocket client against a real server (the `websockets` library)."""

import socket
import threading
from collections.abc import Iterator

import pytest
from websockets.sync.server import ServerConnection, serve

from sessions.websocket import ClientSocket, WebSocketClosed

SUBPROTOCOL = "v1.kernel.websocket.jupyter.org"


def _handler(connection: ServerConnection) -> None:
    assert connection.request is not None
    if connection.request.headers.get("Authorization") != "token t":
        connection.close(4001)
        return
    for message in connection:
        if message == "fragments":
            connection.send(iter(["frag", "ments", " joined"]))
        elif message == "ping me":
            connection.ping(b"p")
            connection.send("pinged")
        elif message == "big":
            connection.send(b"x" * 4096)
        else:
            connection.send(message)


@pytest.fixture
def server() -> Iterator[int]:
    with serve(
        _handler,
        "127.0.0.1",
        0,
        subprotocols=[SUBPROTOCOL],  # type: ignore[list-item]
        compression=None,
    ) as running:
        thread = threading.Thread(target=running.serve_forever, daemon=True)
        thread.start()
        yield running.socket.getsockname()[1]
        running.shutdown()
        thread.join(5)


def _open(port: int, *, max_bytes: int = 1 << 20) -> ClientSocket:
    stream = socket.create_connection(("127.0.0.1", port), timeout=5)
    client = ClientSocket(stream, max_bytes=max_bytes)
    client.handshake(
        path="/sessions/7/lab/api/kernels/k/channels?session_id=s",
        headers=[("Host", f"127.0.0.1:{port}"), ("Authorization", "token t")],
        subprotocols=[SUBPROTOCOL, "other"],
    )
    return client


def test_text_binary_fragments_and_pings_cross(server: int) -> None:
    client = _open(server)
    assert client.subprotocol == SUBPROTOCOL
    client.send(b"hello", text=True)
    echoed = client.receive()
    assert (echoed.data, echoed.text) == (b"hello", True)
    client.send(b"\x00\x01" * 70000, text=False)  # a 64-bit length
    assert client.receive().data == b"\x00\x01" * 70000
    client.send(b"fragments", text=True)
    assert client.receive().data == b"fragments joined"
    client.send(b"ping me", text=True)
    assert client.receive().data == b"pinged"  # the ping was answered on the way
    client.close()
    assert client.closed


def test_a_message_over_the_cap_ends_the_socket(server: int) -> None:
    client = _open(server, max_bytes=1024)
    client.send(b"big", text=True)
    with pytest.raises(WebSocketClosed) as closed:
        client.receive()
    assert closed.value.code == 1009
    client.close()


def test_a_server_that_closes_says_its_code(server: int) -> None:
    stream = socket.create_connection(("127.0.0.1", server), timeout=5)
    client = ClientSocket(stream, max_bytes=1024)
    client.handshake(
        path="/", headers=[("Host", "x"), ("Authorization", "token no")], subprotocols=[SUBPROTOCOL]
    )
    with pytest.raises(WebSocketClosed) as closed:
        client.receive()
    assert closed.value.code == 4001
