"""The SSH gateway: the only module that talks to paramiko.

Host keys are pinned per cluster; every call has a deadline and a cap on the
output it may send; stdout and stderr are drained together before the exit status
is read (paramiko#448).
"""

import io
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NoReturn, Self

import paramiko

from clusters.errors import ClusterError
from clusters.hostkeys import fingerprint, parse_host_key

CONNECT_TIMEOUT = 10.0
COMMAND_TIMEOUT = 30.0
KEEPALIVE_INTERVAL = 15
# What a command may send (stdout and stderr) unless its caller says: endless output is cut.
MAX_OUTPUT_BYTES = 64 * 1024 * 1024
CHUNK_BYTES = 65536


class SSHError(ClusterError):
    """An SSH failure; `retryable` says whether trying again later can help."""


class HostKeyMismatch(SSHError):
    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class CommandTimedOut(SSHError):  # still running at its deadline, abandoned
    def __init__(self, message: str, *, timeout: float) -> None:
        super().__init__(message, retryable=True)
        self.timeout = timeout


class OutputCapExceeded(SSHError):
    """A command that sent more than its cap; its channel was closed and the output dropped."""

    def __init__(self, message: str, *, cap: int) -> None:
        super().__init__(message, retryable=True)
        self.cap = cap


@dataclass
class GatewayStats:
    """What this process sent to clusters; benchmarks and tests read it."""

    connects: int = 0
    commands: int = 0
    uploads: int = 0
    capped: int = 0  # commands cut at their output cap

    def reset(self) -> None:
        self.connects = self.commands = self.uploads = self.capped = 0


stats = GatewayStats()
# A stream from open_tunnel or open_command_stream: socket-like (sendall, recv, makefile).
Tunnel = paramiko.Channel


@dataclass(frozen=True)
class LoginKey:
    """A key made for one connection, held in memory only, and its OpenSSH certificate line."""

    private_key: str = field(repr=False)
    certificate: str


@dataclass(frozen=True)
class Endpoint:
    """Where and as whom to connect, and how: a stored key, or `issuer`'s fresh key and
    certificate at each new connection; with a `refusal` (a revoked user), no connection."""

    cluster_name: str
    host: str
    port: int
    host_key: str
    username: str
    private_key: str = field(default="", repr=False)
    issuer: Callable[[], LoginKey] | None = field(default=None, compare=False, repr=False)
    refusal: str = field(default="", compare=False)
    # What to fix when the server refuses the login, said after the refusal.
    refused_help: str = field(default="", compare=False)


@dataclass(frozen=True)
class CommandResult:
    exit_status: int
    stdout: bytes
    stderr: bytes

    @property
    def text(self) -> str:
        return self.stdout.decode(errors="replace")

    @property
    def error_text(self) -> str:
        return self.stderr.decode(errors="replace")


_KEY_CLASSES = (paramiko.Ed25519Key, paramiko.ECDSAKey, paramiko.RSAKey)


def _load_private_key(text: str) -> paramiko.PKey:
    for key_class in _KEY_CLASSES:
        try:
            return key_class.from_private_key(io.StringIO(text))
        except (paramiko.SSHException, ValueError):
            continue
    raise SSHError(
        "The cluster account's private key cannot be read (expected an unencrypted "
        "ed25519, ECDSA or RSA key); replace it in the admin page.",
        retryable=False,
    )


def _login_key(endpoint: Endpoint) -> paramiko.PKey:
    if endpoint.issuer is None:
        return _load_private_key(endpoint.private_key)
    issued = endpoint.issuer()
    key = _load_private_key(issued.private_key)
    key.load_certificate(issued.certificate)
    return key


def _mismatch(endpoint: Endpoint, presented: paramiko.PKey) -> HostKeyMismatch:
    expected = fingerprint(*parse_host_key(endpoint.host_key))
    return HostKeyMismatch(
        f"Host key mismatch for cluster {endpoint.cluster_name!r} "
        f"({endpoint.host}:{endpoint.port}): expected {expected}, the server presented "
        f"{fingerprint(presented.get_name(), presented.asbytes())}. If the server's key was "
        "changed on purpose, update the cluster's host key in the admin page; otherwise "
        "do not connect."
    )


class _RejectUnpinned(paramiko.RejectPolicy):
    """Refuses any key but the pinned one, naming both fingerprints."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint

    def missing_host_key(
        self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey
    ) -> NoReturn:
        raise _mismatch(self.endpoint, key)


def _send_input(channel: paramiko.Channel, data: bytes) -> None:
    """Send stdin; a command that ended before reading it all (an early error) lost nothing."""
    try:
        channel.sendall(data)
    except OSError:
        if not channel.exit_status_ready():
            raise


class Connection:
    """One authenticated SSH connection to a cluster login node."""

    def __init__(self, endpoint: Endpoint, *, connect_timeout: float = CONNECT_TIMEOUT) -> None:
        if endpoint.refusal:
            raise SSHError(endpoint.refusal, retryable=False)
        self.endpoint = endpoint
        self._client = paramiko.SSHClient()
        # No system or user known_hosts: the pinned key is the only trusted one.
        key_type, blob = parse_host_key(endpoint.host_key)
        host_entry = endpoint.host if endpoint.port == 22 else f"[{endpoint.host}]:{endpoint.port}"
        self._client.get_host_keys().add(
            host_entry, key_type, paramiko.PKey.from_type_string(key_type, blob)
        )
        self._client.set_missing_host_key_policy(_RejectUnpinned(endpoint))
        try:
            self._client.connect(
                endpoint.host,
                port=endpoint.port,
                username=endpoint.username,
                pkey=_login_key(endpoint),
                timeout=connect_timeout,
                banner_timeout=connect_timeout,
                auth_timeout=connect_timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except SSHError:
            self._client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            self._client.close()
            raise _mismatch(endpoint, exc.key) from exc
        except paramiko.AuthenticationException as exc:
            self._client.close()
            help_text = endpoint.refused_help or (
                "check that its public key is in that user's ~/.ssh/authorized_keys."
            )
            raise SSHError(
                f"Cluster {endpoint.cluster_name!r} refused the key of account "
                f"{endpoint.username!r}: {help_text}",
                retryable=False,
            ) from exc
        except (OSError, paramiko.SSHException, EOFError) as exc:
            self._client.close()
            raise SSHError(
                f"Cannot reach cluster {endpoint.cluster_name!r} at "
                f"{endpoint.host}:{endpoint.port}: {exc}",
                retryable=True,
            ) from exc
        stats.connects += 1
        transport = self._client.get_transport()
        assert transport is not None  # noqa: S101 - connect() succeeded
        transport.set_keepalive(KEEPALIVE_INTERVAL)
        self._transport = transport

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    @property
    def is_alive(self) -> bool:
        return self._transport.is_active()

    def run(
        self,
        command: str,
        *,
        stdin: bytes = b"",
        timeout: float = COMMAND_TIMEOUT,
        max_output: int = MAX_OUTPUT_BYTES,
    ) -> CommandResult:
        """Run one command; the caller quotes every argument (shlex.quote).

        Past `max_output` bytes (stdout and stderr together) the channel is closed, which
        ends the command at its next write, and `OutputCapExceeded` is raised: memory
        stays within the cap and one chunk, whatever the command prints.
        """
        deadline = time.monotonic() + timeout
        stats.commands += 1
        try:
            channel = self._transport.open_session(timeout=timeout)
            channel.exec_command(command)
            if stdin:
                _send_input(channel, stdin)
            if not channel.closed:
                channel.shutdown_write()
            out, err = bytearray(), bytearray()
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    channel.close()
                    raise CommandTimedOut(
                        f"Command on cluster {self.endpoint.cluster_name!r} took longer than "
                        f"{timeout:.0f} s and was abandoned.",
                        timeout=timeout,
                    )
                select.select([channel], [], [], min(remaining, 1.0))
                while channel.recv_ready() and len(out) + len(err) <= max_output:
                    out += channel.recv(CHUNK_BYTES)
                while channel.recv_stderr_ready() and len(out) + len(err) <= max_output:
                    err += channel.recv_stderr(CHUNK_BYTES)
                if len(out) + len(err) > max_output:
                    channel.close()
                    stats.capped += 1
                    raise OutputCapExceeded(
                        f"Command on cluster {self.endpoint.cluster_name!r} as "
                        f"{self.endpoint.username!r} sent more than {max_output} bytes and "
                        "was stopped.",
                        cap=max_output,
                    )
                # sshd sends the exit status when the command exits, which can be before the
                # last of its output: done only at EOF, which follows every byte.
                if (
                    channel.exit_status_ready()
                    and (channel.eof_received or channel.closed)
                    and not (channel.recv_ready() or channel.recv_stderr_ready())
                ):
                    break
            status = channel.recv_exit_status()
            channel.close()
        except (TimeoutError, OSError, paramiko.SSHException, EOFError) as exc:
            raise SSHError(
                f"Lost the connection to cluster {self.endpoint.cluster_name!r}: {exc}",
                retryable=True,
            ) from exc
        return CommandResult(exit_status=status, stdout=bytes(out), stderr=bytes(err))

    def open_tunnel(self, host: str, port: int, *, timeout: float = CONNECT_TIMEOUT) -> Tunnel:
        """A TCP stream to host:port as the login node reaches it (`ssh -W`), as this login."""
        try:
            return self._transport.open_channel(
                "direct-tcpip", (host, port), ("127.0.0.1", 0), timeout=timeout
            )
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise SSHError(
                f"Cluster {self.endpoint.cluster_name!r} did not connect to {host}:{port}: {exc}",
                retryable=isinstance(exc, EOFError) or not self.is_alive,
            ) from exc

    def open_command_stream(self, command: str, *, timeout: float = CONNECT_TIMEOUT) -> Tunnel:
        """A command's stdin and stdout as one stream, as open_tunnel's (its stderr apart)."""
        try:
            channel = self._transport.open_session(timeout=timeout)
            channel.exec_command(command)
        except (OSError, paramiko.SSHException, EOFError) as exc:  # refused: MaxSessions
            message = f"Cluster {self.endpoint.cluster_name!r} did not start a stream: {exc}"
            raise SSHError(message, retryable=not self.is_alive) from exc
        return channel

    def upload(self, remote_path: str, data: bytes, *, mode: int = 0o600) -> None:
        """Write a file on the cluster with the given mode, via SFTP."""
        stats.uploads += 1
        try:
            with self._client.open_sftp() as sftp:
                sftp.get_channel().settimeout(COMMAND_TIMEOUT)  # type: ignore[union-attr]
                with sftp.open(remote_path, "wb") as handle:
                    handle.chmod(mode)
                    handle.write(data)
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise SSHError(
                f"Upload of {remote_path} to cluster {self.endpoint.cluster_name!r} failed: {exc}",
                retryable=True,
            ) from exc

    def home_path(self, path: str) -> str:
        """`path` made absolute: `~/x` and relative paths start in the login's home."""
        try:
            with self._client.open_sftp() as sftp:
                home = sftp.normalize(".")
        except (OSError, paramiko.SSHException, EOFError) as exc:
            raise SSHError(
                f"Cannot find the home directory on cluster {self.endpoint.cluster_name!r}: {exc}",
                retryable=True,
            ) from exc
        if path.startswith("/"):
            return path
        relative = path[2:] if path.startswith("~/") else path.lstrip("~")
        return f"{home.rstrip('/')}/{relative}".rstrip("/")


class _Pool:
    """Open connections of this process, one per endpoint, reused while alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._connections: dict[Endpoint, Connection] = {}
        self._pid = os.getpid()

    def get(self, endpoint: Endpoint) -> Connection:
        if endpoint.refusal:
            # A revoked login's open connections, whatever their key, are closed.
            self._discard_login(endpoint)
            raise SSHError(endpoint.refusal, retryable=False)
        with self._lock:
            if self._pid != os.getpid():
                # A forked worker child must not share its parent's sockets.
                self._connections = {}
                self._pid = os.getpid()
            connection = self._connections.get(endpoint)
            if connection is not None and connection.is_alive:
                return connection
            if connection is not None:
                connection.close()
            connection = Connection(endpoint)
            self._connections[endpoint] = connection
            return connection

    @contextmanager
    def session(self, endpoint: Endpoint) -> Iterator[Connection]:
        """The endpoint's pooled connection; one that fails in a retryable way is discarded.

        The one place a broken connection leaves the pool: callers never discard by hand.
        """
        try:
            yield self.get(endpoint)
        except SSHError as exc:
            if exc.retryable:
                self.discard(endpoint)
            raise

    def discard(self, endpoint: Endpoint) -> None:
        with self._lock:
            connection = self._connections.pop(endpoint, None)
        if connection is not None:
            connection.close()

    def _discard_login(self, endpoint: Endpoint) -> None:
        login = (endpoint.cluster_name, endpoint.host, endpoint.port, endpoint.username)
        with self._lock:
            gone = [
                self._connections.pop(held)
                for held in list(self._connections)
                if (held.cluster_name, held.host, held.port, held.username) == login
            ]
        for connection in gone:
            connection.close()

    def close_all(self) -> None:
        with self._lock:
            connections, self._connections = list(self._connections.values()), {}
        for connection in connections:
            connection.close()


pool = _Pool()
