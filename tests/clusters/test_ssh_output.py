"""The gateway reads a command's output up to a cap and no further, whatever it prints.

Against an SSH server in this process (paramiko's server side) whose commands run here
with sh: a login shell printing 150 MB is cut at the cap, its channel closed (the
server's writes then fail, as sshd's do, and the command is killed), and the memory the
read took stays near the cap.
"""

import io
import os
import socket
import subprocess
import threading
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field

import paramiko
import pytest
from paramiko.common import AUTH_FAILED, AUTH_SUCCESSFUL, OPEN_SUCCEEDED

from clusters.ssh import (
    CommandTimedOut,
    Connection,
    Endpoint,
    OutputCapExceeded,
    stats,
)

MIB = 1024 * 1024


@dataclass
class Server(paramiko.ServerInterface):
    """Accepts one client key; runs each exec request with sh, its output sent in chunks."""

    client_key: paramiko.PKey
    killed: list[str] = field(default_factory=list)  # commands whose channel closed first
    done: threading.Event = field(default_factory=threading.Event)

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        same = key.asbytes() == self.client_key.asbytes()
        return AUTH_SUCCESSFUL if same else AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        threading.Thread(target=self._exec, args=(channel, command.decode()), daemon=True).start()
        return True

    def _exec(self, channel: paramiko.Channel, command: str) -> None:
        with subprocess.Popen(
            ["sh", "-c", command], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE
        ) as proc:
            assert proc.stdout is not None
            try:
                while chunk := os.read(proc.stdout.fileno(), 65536):
                    channel.sendall(chunk)
                channel.send_exit_status(proc.wait())
            # The client closed the channel (OSError) or, when the write was under way, its
            # whole connection (paramiko's packetizer raises EOFError): sshd's writes fail alike.
            except (OSError, EOFError):
                self.killed.append(command)
                proc.kill()
            finally:
                self.done.set()  # the command's end is known; closing may wait on the client
                channel.close()


@pytest.fixture
def server() -> Iterator[tuple[Server, Connection]]:
    host_key, client_key = paramiko.ECDSAKey.generate(), paramiko.ECDSAKey.generate()
    listener = socket.create_server(("127.0.0.1", 0))
    server = Server(client_key)
    transports: list[paramiko.Transport] = []

    def accept() -> None:
        sock, _ = listener.accept()
        transport = paramiko.Transport(sock)
        transport.add_server_key(host_key)
        transport.start_server(server=server)
        transports.append(transport)

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    private = io.StringIO()
    client_key.write_private_key(private)
    endpoint = Endpoint(
        cluster_name="local",
        host="127.0.0.1",
        port=listener.getsockname()[1],
        host_key=f"{host_key.get_name()} {host_key.get_base64()}",
        username="carol",
        private_key=private.getvalue(),
    )
    connection = Connection(endpoint)
    try:
        yield server, connection
    finally:
        connection.close()
        acceptor.join(5)
        for transport in transports:
            transport.close()
        listener.close()


def test_output_under_the_cap_is_read_whole(server: tuple[Server, Connection]) -> None:
    _, connection = server
    result = connection.run("head -c 3000000 /dev/zero; exit 3", max_output=4 * MIB)
    assert result.exit_status == 3 and result.stdout == b"\0" * 3000000


def test_a_flood_is_cut_at_the_cap_its_command_stopped_and_counted(
    server: tuple[Server, Connection],
) -> None:
    host, connection = server
    stats.reset()
    tracemalloc.start()
    try:
        with pytest.raises(OutputCapExceeded, match="sent more than 4194304 bytes") as caught:
            connection.run("head -c 150000000 /dev/zero", max_output=4 * MIB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert caught.value.cap == 4 * MIB and caught.value.retryable
    assert stats.capped == 1
    # The cap, a chunk and paramiko's window (2 MiB) at most: not the 150 MB printed.
    assert peak < 12 * MIB
    assert host.done.wait(30)
    assert host.killed == ["head -c 150000000 /dev/zero"]


def test_a_command_past_its_deadline_is_abandoned(server: tuple[Server, Connection]) -> None:
    _, connection = server
    with pytest.raises(CommandTimedOut, match="longer than 1 s") as caught:
        connection.run("sleep 5", timeout=1.0)
    assert caught.value.timeout == 1.0
