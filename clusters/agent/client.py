"""Runs the portal agent on a cluster: one SSH exec per poll cycle, JSON in, JSON out.

The agent is installed lazily: a poll runs it straight away, and only when
Python answers that the file does not exist is it installed and run again, so
a normal poll is exactly one `Connection.run`.
"""

import base64
import hashlib
import json
import secrets
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clusters.ssh import CommandResult, Endpoint, SSHError

AGENT_SOURCE: bytes = Path(__file__).with_name("portal_agent.py").read_bytes()
AGENT_HASH: str = hashlib.sha256(AGENT_SOURCE).hexdigest()[:16]
AGENT_VERSION = 1
# Seconds the SSH call may take beyond the sum of the command timeouts (file reads, startup).
TIMEOUT_SLACK = 30.0


def agent_remote_path() -> str:
    """Where the agent lives, relative to the account's home directory."""
    return f".portal/agent-{AGENT_HASH}.py"


class AgentError(SSHError):
    """The agent could not be run, refused the request or answered garbage."""


class RemoteShell(Protocol):
    """What the agent needs of a connection (`clusters.ssh.Connection` is one)."""

    endpoint: Endpoint

    def run(self, command: str, *, stdin: bytes = b"", timeout: float = ...) -> CommandResult: ...


@dataclass(frozen=True)
class AgentCommand:
    id: str
    argv: Sequence[str]
    timeout: float = 20.0


@dataclass(frozen=True)
class FileRead:
    key: str
    path: str
    offset: int = 0


@dataclass(frozen=True)
class ListingRead:
    key: str
    path: str


@dataclass(frozen=True)
class AgentRequest:
    commands: Sequence[AgentCommand] = ()
    files: Sequence[FileRead] = ()
    listings: Sequence[ListingRead] = ()
    max_bytes: int = 8 * 1024 * 1024  # all files together, shared fairly
    max_bytes_per_file: int = 1024 * 1024
    max_output_bytes: int = 4 * 1024 * 1024  # per command, per stream

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": AGENT_VERSION,
                "commands": [
                    {"id": c.id, "argv": list(c.argv), "timeout": c.timeout} for c in self.commands
                ],
                "files": [{"key": f.key, "path": f.path, "offset": f.offset} for f in self.files],
                "listings": [{"key": x.key, "path": x.path} for x in self.listings],
                "max_bytes": self.max_bytes,
                "max_bytes_per_file": self.max_bytes_per_file,
                "max_output_bytes": self.max_output_bytes,
            }
        ).encode()

    @property
    def timeout(self) -> float:
        return sum(c.timeout for c in self.commands) + TIMEOUT_SLACK


@dataclass(frozen=True)
class CommandOutput:
    exit: int  # 127: the binary is missing; 124 with timed_out: killed at its timeout
    stdout: str
    stderr: str
    truncated: bool
    timed_out: bool
    seconds: float


@dataclass(frozen=True)
class FileChunk:
    """New bytes of one file; `error` is None, "not found", "truncated", "permission denied"..."""

    offset: int
    data: bytes
    size: int | None
    more: bool
    error: str | None
    inode: int | None

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


@dataclass(frozen=True)
class ListingEntry:
    name: str
    size: int  # for a directory: its files one level down
    mtime: float
    is_dir: bool


@dataclass(frozen=True)
class Listing:
    entries: tuple[ListingEntry, ...]
    error: str | None
    truncated: bool


@dataclass(frozen=True)
class AgentReply:
    time: float
    commands: Mapping[str, CommandOutput] = field(default_factory=dict)
    files: Mapping[str, FileChunk] = field(default_factory=dict)
    listings: Mapping[str, Listing] = field(default_factory=dict)


# (cluster, host, port, username, hash) known to have this agent installed, per process.
_installed: set[tuple[str, str, int, str, str]] = set()


def _account(connection: RemoteShell) -> tuple[str, str, int, str, str]:
    e = connection.endpoint
    return (e.cluster_name, e.host, e.port, e.username, AGENT_HASH)


def _install(connection: RemoteShell) -> None:
    path = agent_remote_path()
    partial = f"{path}.{secrets.token_hex(4)}.partial"
    # Written under a temporary name and renamed, so an interrupted install never leaves
    # a half-written agent under the real name. `sh -c` because login shells differ.
    script = (
        f"umask 077 && mkdir -p .portal && chmod 700 .portal && cat > {shlex.quote(partial)} "
        f"&& chmod 700 {shlex.quote(partial)} && mv -f {shlex.quote(partial)} {shlex.quote(path)}"
    )
    result = connection.run(f"sh -c {shlex.quote(script)}", stdin=AGENT_SOURCE, timeout=30)
    if result.exit_status != 0:
        raise AgentError(
            f"Cannot install the portal agent in ~/{path} on cluster "
            f"{connection.endpoint.cluster_name!r} as {connection.endpoint.username!r}: "
            f"{result.error_text.strip() or f'exit status {result.exit_status}'}",
            retryable=True,
        )
    _installed.add(_account(connection))


def ensure_agent(connection: RemoteShell) -> None:
    """Install the agent for this account unless this process already knows it is there."""
    if _account(connection) not in _installed:
        _install(connection)


def _agent_missing(result: CommandResult) -> bool:
    # CPython's own message, e.g. "python3: can't open file '.portal/agent-…py': [Errno 2] …".
    # Not stdout: a login shell may print a banner there.
    return (
        result.exit_status == 2
        and "can't open file" in result.error_text
        and f"agent-{AGENT_HASH}.py" in result.error_text
        and "[Errno 2]" in result.error_text
    )


def run_agent(
    connection: RemoteShell,
    request: AgentRequest,
    *,
    python: str = "python3",
    timeout: float | None = None,
) -> AgentReply:
    """One poll: run the agent with `request`, installing it first if it is missing."""
    # -I: isolated mode, so the user's PYTHONPATH or site-packages cannot break the agent.
    command = f"{shlex.quote(python)} -I {shlex.quote(agent_remote_path())}"
    payload = request.to_json()
    deadline = timeout if timeout is not None else request.timeout
    result = connection.run(command, stdin=payload, timeout=deadline)
    if _agent_missing(result):
        _install(connection)
        result = connection.run(command, stdin=payload, timeout=deadline)
    reply = _parse(connection.endpoint, result)
    _installed.add(_account(connection))
    return reply


def _parse(endpoint: Endpoint, result: CommandResult) -> AgentReply:
    where = f"on cluster {endpoint.cluster_name!r} as {endpoint.username!r}"
    stderr = result.error_text.strip()[-2000:]
    if result.exit_status == 127 and not result.stdout:
        raise AgentError(
            f"The portal agent cannot start {where}: {stderr} (is python3 on the PATH of "
            "non-interactive SSH sessions?)",
            retryable=False,
        )
    # Only the last line: a chatty ~/.bashrc may print before the agent does.
    lines = result.stdout.strip().splitlines()
    try:
        document = json.loads(lines[-1]) if lines else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise AgentError(
            f"The portal agent {where} gave no JSON reply (exit status "
            f"{result.exit_status}): {stderr or 'no error output'}",
            retryable=True,
        )
    if "error" in document:
        raise AgentError(
            f"The portal agent {where} refused the request: {document['error']}", retryable=False
        )
    try:
        return _reply(document)
    except (KeyError, TypeError, ValueError) as exc:  # binascii.Error is a ValueError
        raise AgentError(
            f"The portal agent {where} sent a malformed reply ({exc!r}): {stderr}",
            retryable=True,
        ) from exc


def _reply(document: dict[str, Any]) -> AgentReply:
    if document["version"] != AGENT_VERSION:
        raise ValueError(f"version {document['version']!r}, expected {AGENT_VERSION}")
    return AgentReply(
        time=float(document["time"]),
        commands={k: CommandOutput(**v) for k, v in document["commands"].items()},
        files={
            k: FileChunk(**{**v, "data": base64.b64decode(v["data"], validate=True)})
            for k, v in document["files"].items()
        },
        listings={
            k: Listing(
                entries=tuple(ListingEntry(**e) for e in v["entries"]),
                error=v["error"],
                truncated=v["truncated"],
            )
            for k, v in document["listings"].items()
        },
    )
