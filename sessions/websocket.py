"""A WebSocket client on an SSH tunnel: the session side of a proxied socket (RFC 6455).

Small on purpose: no extensions (no compression offered), text and binary messages,
fragments joined, pings answered, one message at most `max_bytes`. Blocking calls,
one reader thread and any writer, as the proxy's consumer uses it.
"""

import base64
import contextlib
import hashlib
import os
import struct
import threading
from dataclasses import dataclass
from typing import Protocol

from clusters.errors import ClusterError
from clusters.ssh import pool
from sessions.target import LabTarget, SessionUnavailable, forget

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_HANDSHAKE_BYTES = 65536
OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class Stream(Protocol):
    def sendall(self, data: bytes, /) -> None: ...
    def recv(self, size: int, /) -> bytes: ...
    def close(self) -> None: ...


class WebSocketClosed(Exception):
    """The other side closed, broke the protocol, or sent a message over the cap."""

    def __init__(self, code: int = 1000) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class Message:
    data: bytes
    text: bool


def encode_frame(opcode: int, payload: bytes, *, mask: bytes | None = None) -> bytes:
    """One final frame; a client's frames are masked (`mask`: 4 bytes, random when None)."""
    key = os.urandom(4) if mask is None else mask
    length = len(payload)
    if length < 126:
        head = struct.pack("!BB", 0x80 | opcode, 0x80 | length)
    elif length < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, length)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, length)
    return head + key + _unmask(payload, key)


def _unmask(payload: bytes, key: bytes) -> bytes:
    if not payload:
        return b""
    repeated = (key * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(
        len(payload), "big"
    )


def accept_key(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()  # noqa: S324


class ClientSocket:
    """One WebSocket to a session, opened by `handshake` on a connected stream."""

    def __init__(self, stream: Stream, *, max_bytes: int) -> None:
        self._stream = stream
        self._buffer = bytearray()
        self._send_lock = threading.Lock()
        self.max_bytes = max_bytes
        self.subprotocol: str | None = None
        self.closed = False

    def handshake(
        self, *, path: str, headers: list[tuple[str, str]], subprotocols: list[str]
    ) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        lines = [
            f"GET {path} HTTP/1.1",
            "Upgrade: websocket",
            "Connection: Upgrade",
            f"Sec-WebSocket-Key: {key}",
            "Sec-WebSocket-Version: 13",
            *(f"{name}: {value}" for name, value in headers),
        ]
        if subprotocols:
            lines.append(f"Sec-WebSocket-Protocol: {', '.join(subprotocols)}")
        self._stream.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > MAX_HANDSHAKE_BYTES:
                raise WebSocketClosed(1002)
            self._fill()
        head, _, rest = bytes(self._buffer).partition(b"\r\n\r\n")
        self._buffer = bytearray(rest)
        status, *header_lines = head.decode("latin-1").split("\r\n")
        answer = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            answer[name.strip().lower()] = value.strip()
        accepted = answer.get("sec-websocket-accept") == accept_key(key)
        if status.split(" ")[1:2] != ["101"] or not accepted:
            raise WebSocketClosed(1002)
        chosen = answer.get("sec-websocket-protocol") or None
        if chosen is not None and chosen not in subprotocols:
            raise WebSocketClosed(1002)
        self.subprotocol = chosen

    def _fill(self) -> None:
        data = self._stream.recv(65536)
        if not data:
            raise WebSocketClosed(1006)
        self._buffer += data

    def _take(self, size: int) -> bytes:
        while len(self._buffer) < size:
            self._fill()
        taken = bytes(self._buffer[:size])
        del self._buffer[:size]
        return taken

    def _frame(self) -> tuple[bool, int, bytes]:
        first, second = self._take(2)
        if second & 0x80 or first & 0x70:  # a server's frames are unmasked; no extensions
            raise WebSocketClosed(1002)
        length = second & 0x7F
        if length == 126:
            (length,) = struct.unpack("!H", self._take(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", self._take(8))
        if length > self.max_bytes:
            raise WebSocketClosed(1009)
        return bool(first & 0x80), first & 0x0F, self._take(length)

    def receive(self) -> Message:
        """The next message; pings are answered on the way. Raises WebSocketClosed."""
        parts: list[bytes] = []
        opcode_of_message = 0
        while True:
            final, opcode, payload = self._frame()
            if opcode == OP_PING:
                self._send(OP_PONG, payload)
            elif opcode == OP_PONG:
                continue
            elif opcode == OP_CLOSE:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1000
                self.close(code)
                raise WebSocketClosed(code)
            else:
                if (opcode == OP_CONT) != bool(parts):
                    raise WebSocketClosed(1002)
                opcode_of_message = opcode_of_message or opcode
                parts.append(payload)
                if sum(map(len, parts)) > self.max_bytes:
                    raise WebSocketClosed(1009)
                if final:
                    return Message(b"".join(parts), text=opcode_of_message == OP_TEXT)

    def send(self, data: bytes, *, text: bool) -> None:
        self._send(OP_TEXT if text else OP_BINARY, data)

    def _send(self, opcode: int, payload: bytes) -> None:
        with self._send_lock:
            if self.closed and opcode != OP_CLOSE:
                raise WebSocketClosed(1006)
            self._stream.sendall(encode_frame(opcode, payload))

    def close(self, code: int = 1000) -> None:
        """Say goodbye (once) and close the stream."""
        if self.closed:
            return
        with contextlib.suppress(OSError):
            self._send(OP_CLOSE, struct.pack("!H", code))
        self.closed = True
        self._stream.close()


def open_socket(
    *,
    target: LabTarget,
    path: str,
    headers: list[tuple[str, str]],
    subprotocols: list[str],
    max_bytes: int,
) -> ClientSocket:
    """A WebSocket to the session at `path`, over a new tunnel on its owner's login."""
    try:
        with pool.session(target.endpoint) as connection:
            tunnel = target.open_stream(connection)
    except ClusterError as exc:
        forget(target.attempt)
        raise SessionUnavailable("JupyterLab does not answer.") from exc
    socket = ClientSocket(tunnel, max_bytes=max_bytes)
    try:
        tunnel.settimeout(30.0)
        socket.handshake(path=path, headers=headers, subprotocols=subprotocols)
        tunnel.settimeout(None)
    except (OSError, WebSocketClosed) as exc:
        tunnel.close()
        raise SessionUnavailable("JupyterLab refused the socket.", status=502) from exc
    return socket
