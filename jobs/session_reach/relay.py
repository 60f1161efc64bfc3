"""The relay a session's stream runs on its node: stdin and stdout to 127.0.0.1:<port>.

Standard library only: the portal runs this file's text with `python3 -I -c` in a step of
the session's own job (`srun --jobid=<id> --overlap`, jobs.session_reach), as its owner.
It connects to the node's loopback at the one port it is given, says READY (one byte) once
connected, then copies bytes both ways unchanged until the server closes or the portal
goes: stdin's end is passed on as a half-close, and a write to a closed stdout ends it.
A refused connection exits with nothing on stdout, so the portal tells "not listening
yet" from a stream that opened.
"""

import contextlib
import os
import socket
import sys
import threading

READY = b"+"
CHUNK = 65536


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stdin_to_socket(stdin: int, sock: socket.socket) -> None:
    try:
        while data := os.read(stdin, CHUNK):
            sock.sendall(data)
    except OSError:
        pass  # the portal's side broke: passed on as an end
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def relay(port: int, *, stdin: int = 0, stdout: int = 1) -> int:
    """Copy between the fds and 127.0.0.1:port; the exit status (0: the server closed)."""
    try:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as exc:
        sys.stderr.write(f"relay: 127.0.0.1:{port}: {exc}\n")
        return 3
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        _write_all(stdout, READY)
    except OSError:
        return 4
    threading.Thread(target=_stdin_to_socket, args=(stdin, sock), daemon=True).start()
    try:
        while data := sock.recv(CHUNK):
            _write_all(stdout, data)
    except OSError:
        return 4
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit() or not 1024 <= int(argv[0]) <= 65535:
        sys.stderr.write("usage: relay <port 1024-65535>\n")
        return 2
    return relay(int(argv[0]))


if __name__ == "__main__":
    os._exit(main(sys.argv[1:]))  # the stdin thread may still wait on a read
