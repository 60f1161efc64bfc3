"""The srun relay to a session's server: the relay program against real sockets, the command
the login node runs for it, and the cluster setting that chooses it (issue 39)."""

import os
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest

from clusters.admin import ClusterForm
from clusters.models import Cluster, SessionReach
from clusters.slurm.tools import SlurmTools
from jobs.session_reach import READY, relay_command, relay_source

TIMEOUT = 30


class Server:
    """A TCP server on 127.0.0.1 that hands each accepted connection to `serve`."""

    def __init__(self, serve: Callable[[socket.socket], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.seen: list[bytes] = []
        self._thread = threading.Thread(target=self._accept, args=(serve,), daemon=True)
        self._thread.start()

    def _accept(self, serve: Callable[[socket.socket], None]) -> None:
        with self.listener:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            with connection:
                connection.settimeout(TIMEOUT)
                serve(connection)

    def close(self) -> None:
        self.listener.close()
        self._thread.join(TIMEOUT)


def _relay(port: int | str) -> subprocess.Popen[bytes]:
    """The relay as the login node's srun starts it on the node: `python3 -I -c <source>`."""
    return subprocess.Popen(
        [sys.executable, "-I", "-c", relay_source(), str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )


def _read(process: subprocess.Popen[bytes], size: int) -> bytes:
    assert process.stdout is not None
    data = b""
    while len(data) < size:
        chunk = os.read(process.stdout.fileno(), size - len(data))
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Relays a test started, killed if still running when it ends."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.wait(TIMEOUT)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


def _echo_until_eof(connection: socket.socket) -> None:
    while data := connection.recv(65536):
        connection.sendall(data)


def test_every_byte_value_crosses_both_ways_unchanged(stopped) -> None:
    server = Server(_echo_until_eof)
    relay = _relay(server.port)
    stopped.append(relay)
    assert _read(relay, 1) == READY
    assert relay.stdin is not None
    for payload in (bytes(range(256)), b"\r\n\x00\x04\x03\x1b[A\n", os.urandom(3 * 65536 + 7)):
        relay.stdin.write(payload)
        assert _read(relay, len(payload)) == payload
    relay.stdin.close()  # the server sees the end, closes, and the relay ends
    assert relay.wait(TIMEOUT) == 0
    server.close()


def test_the_end_of_stdin_is_a_half_close_and_the_answer_still_arrives(stopped) -> None:
    received: list[bytes] = []

    def answer_after_eof(connection: socket.socket) -> None:
        data = b""
        while chunk := connection.recv(65536):
            data += chunk
        received.append(data)
        connection.sendall(b"after your end: " + data[::-1])

    server = Server(answer_after_eof)
    relay = _relay(server.port)
    stopped.append(relay)
    out, err = relay.communicate(b"GET / HTTP/1.0\r\n\r\n", timeout=TIMEOUT)
    assert received == [b"GET / HTTP/1.0\r\n\r\n"]
    assert out == READY + b"after your end: " + b"\n\r\n\r0.1/PTTH / TEG"
    assert relay.returncode == 0 and err == b""
    server.close()


def test_a_server_that_closes_ends_the_relay_with_what_it_sent(stopped) -> None:
    def say_and_close(connection: socket.socket) -> None:
        connection.sendall(b"bye\x00")

    server = Server(say_and_close)
    relay = _relay(server.port)
    stopped.append(relay)
    # stdin stays open: the relay ends on the server's close alone.
    assert _read(relay, 5) == READY + b"bye\x00"
    assert relay.wait(TIMEOUT) == 0
    assert _read(relay, 1) == b""
    server.close()


def test_a_portal_that_goes_away_ends_the_relay(stopped) -> None:
    server = Server(_echo_until_eof)
    relay = _relay(server.port)
    stopped.append(relay)
    assert _read(relay, 1) == READY
    assert relay.stdout is not None and relay.stdin is not None
    relay.stdout.close()  # the portal's side is gone: the next byte back cannot be written
    relay.stdin.write(b"ping")
    assert relay.wait(TIMEOUT) == 4
    server.close()


def test_no_server_no_ready_byte(stopped) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    relay = _relay(port)
    stopped.append(relay)
    out, err = relay.communicate(timeout=TIMEOUT)
    assert (out, relay.returncode) == (b"", 3)
    assert f"127.0.0.1:{port}".encode() in err


@pytest.mark.parametrize("port", ["80", "65536", "abc", "1.2.3.4:8888", "-1"])
def test_the_relay_takes_only_a_port_number(port: str, stopped) -> None:
    relay = _relay(port)
    stopped.append(relay)
    out, err = relay.communicate(timeout=TIMEOUT)
    assert (out, relay.returncode) == (b"", 2)
    assert b"usage" in err


def test_the_command_runs_srun_in_the_sessions_own_job_by_absolute_path() -> None:
    tools = SlurmTools(bin_dir="/opt/slurm/bin", conf="/etc/slurm/slurm.conf")
    command = relay_command(tools=tools, slurm_job_id="4711", port=45123)
    assert shlex.split(command) == [
        "/usr/bin/env",
        "-i",
        "PATH=/usr/bin:/bin",
        "LANG=C.UTF-8",
        "TZ=UTC",
        "SLURM_TIME_FORMAT=standard",
        "SLURM_CONF=/etc/slurm/slurm.conf",
        "/opt/slurm/bin/srun",
        "--jobid=4711",
        "--overlap",
        "--nodes=1",
        "--ntasks=1",
        "--quiet",
        "--unbuffered",
        "python3",
        "-I",
        "-c",
        relay_source(),
        "45123",
    ]


@pytest.mark.parametrize(
    "job_id", ["", "12;id", "4711 --uid=0", "$(id)", "12_3", "12+0", "-1", "1" * 13]
)
def test_only_a_plain_job_id_makes_a_command(job_id: str) -> None:
    with pytest.raises(ValueError, match="job id"):
        relay_command(tools=SlurmTools(), slurm_job_id=job_id, port=45123)


@pytest.mark.parametrize("port", [80, 1023, 65536, "45123", True, 45123.0])
def test_only_a_session_port_makes_a_command(port: object) -> None:
    with pytest.raises(ValueError, match="port"):
        relay_command(tools=SlurmTools(), slurm_job_id="4711", port=port)  # type: ignore[arg-type]


def test_the_relay_source_crosses_the_shell_as_one_argument() -> None:
    """Its quotes, newlines and `$` reach python3 as written, through the login's shell."""
    command = relay_command(tools=SlurmTools(), slurm_job_id="4711", port=45123)
    echoed = subprocess.run(
        ["/bin/sh", "-c", command.replace("/usr/bin/srun", "printf %s\\\\0", 1)],
        capture_output=True,
        check=True,
        timeout=TIMEOUT,
    ).stdout
    assert echoed.split(b"\0")[-4:-1] == [b"-c", relay_source().encode(), b"45123"]


@pytest.mark.django_db
def test_new_clusters_relay_through_srun_and_the_admin_form_offers_both() -> None:
    assert Cluster().session_reach == SessionReach.SRUN_RELAY
    choices = ClusterForm().fields["session_reach"].choices  # type: ignore[attr-defined]
    assert {value for value, _ in choices} >= {"srun", "tunnel"}
