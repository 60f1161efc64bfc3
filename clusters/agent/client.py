"""Runs the portal agent on a cluster: one SSH exec per poll cycle, JSON in, JSON out.

The agent is never installed: each call sends its source on stdin, ahead of the
request, to an isolated interpreter (`python3 -I`, started by `env -i` with a
minimal PATH), so nothing in the account's home, PATH or Python environment can
replace it. A login shell's rc files still run first unless the site's sshd keeps
them out (docs/operations.md): what comes back through a tenant's session is that
tenant's word (their own files), never the truth about job state or billing (see
`jobs.poll.cycle`), and is read only up to the reply's cap (`AgentRequest.reply_limit`).
"""

import base64
import hashlib
import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from clusters.ssh import CommandResult, Endpoint, SSHError

from .portal_agent import MAX_ENTRIES, MAX_FOUND

AGENT_SOURCE: bytes = Path(__file__).with_name("portal_agent.py").read_bytes()
AGENT_HASH: str = hashlib.sha256(AGENT_SOURCE).hexdigest()[:16]
AGENT_VERSION = 1
CLEAN_PATH = "/usr/bin:/bin"
# Reads the agent's source (its length on the first line) from stdin and runs it as
# __main__; the agent then reads the request from the rest of stdin.
BOOTSTRAP = (
    "import sys;i=sys.stdin.buffer;n=int(i.readline());"
    "exec(compile(i.read(n),'portal_agent','exec'))"
)
# Seconds the SSH call may take beyond the sum of the command timeouts (file reads, startup).
TIMEOUT_SLACK = 30.0
# What a login may print around the agent's reply (a banner, a chatty ~/.bashrc).
BANNER_BYTES = 1024 * 1024
# A listing entry's room in the reply: a name of a few dozen characters, its size, time
# and kind (a directory of long or escaped names is cut, and only its account is late).
ENTRY_BYTES = 200
# All of a request's listings together, however many it names (a poll's hundreds).
MAX_LISTINGS_BYTES = 16 * 1024 * 1024


class AgentError(SSHError):
    """The agent could not be run, refused the request or answered garbage."""


class RemoteShell(Protocol):
    """What the agent needs of a connection (`clusters.ssh.Connection` is one)."""

    endpoint: Endpoint

    def run(
        self, command: str, *, stdin: bytes = b"", timeout: float = ..., max_output: int = ...
    ) -> CommandResult: ...


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
    # At most this many bytes (else the request's `max_bytes_per_file`); may exceed it.
    limit: int | None = None


@dataclass(frozen=True)
class ListingRead:
    """A directory's entries; with `patterns`, a find: the files below it whose names match,
    modified since `since` (a Unix time), `depth` levels down, `visits` entries looked at
    at most (the agent caps both). With `dirs`, directories whose names match are found
    too (sized, not entered). A found entry's name is its path from `path`."""

    key: str
    path: str
    patterns: tuple[str, ...] = ()
    dirs: tuple[str, ...] = ()
    since: float = 0.0
    depth: int = 1
    visits: int = 2000

    def to_json(self) -> dict[str, Any]:
        if not self.patterns and not self.dirs:
            return {"key": self.key, "path": self.path}
        return {
            "key": self.key,
            "path": self.path,
            "patterns": list(self.patterns),
            "dirs": list(self.dirs),
            "since": self.since,
            "depth": self.depth,
            "visits": self.visits,
        }


@dataclass(frozen=True)
class AgentRequest:
    commands: Sequence[AgentCommand] = ()
    files: Sequence[FileRead] = ()
    listings: Sequence[ListingRead] = ()
    max_bytes: int = 16 * 1024 * 1024  # all files together, shared fairly
    max_bytes_per_file: int = 1024 * 1024  # a file without a limit of its own
    max_output_bytes: int = 4 * 1024 * 1024  # per command, per stream

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "version": AGENT_VERSION,
                "commands": [
                    {"id": c.id, "argv": list(c.argv), "timeout": c.timeout} for c in self.commands
                ],
                "files": [_file_json(f, self.max_bytes_per_file) for f in self.files],
                "listings": [x.to_json() for x in self.listings],
                "max_bytes": self.max_bytes,
                # The agent caps each file's limit at this: the largest one asked for.
                "max_bytes_per_file": max(
                    [self.max_bytes_per_file, *(f.limit for f in self.files if f.limit)]
                ),
                "max_output_bytes": self.max_output_bytes,
            }
        ).encode()

    @property
    def timeout(self) -> float:
        return sum(c.timeout for c in self.commands) + TIMEOUT_SLACK

    @property
    def reply_limit(self) -> int:
        """What the gateway reads of the reply to this request, and no more.

        Files in base64; each command's two streams at most 6 bytes a byte (json.dumps's
        escapes); each listing at the agent's cap on entries (`MAX_LISTINGS_BYTES` in
        all); a banner's room.
        """
        wanted = sum(f.limit or self.max_bytes_per_file for f in self.files)
        files = -(-min(wanted, self.max_bytes) // 3) * 4 + 512 * len(self.files)
        commands = 2 * 6 * self.max_output_bytes * len(self.commands)
        entries = sum(MAX_FOUND if x.patterns or x.dirs else MAX_ENTRIES for x in self.listings)
        listings = min(ENTRY_BYTES * entries, MAX_LISTINGS_BYTES)
        return files + commands + listings + BANNER_BYTES


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
    size: int  # for a directory: what `du -sb` counts (the agent's `tree_size`)
    mtime: float
    is_dir: bool
    link: bool = False  # a symbolic link: its own size, never followed
    exact: bool = True  # False: a directory too large to size whole (a lower bound)
    marks: tuple[str, ...] = ()  # the completion markers a directory holds (agent's MARKERS)


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


def _file_json(read: FileRead, default_limit: int) -> dict[str, Any]:
    limit = read.limit if read.limit is not None else default_limit
    return {"key": read.key, "path": read.path, "offset": read.offset, "limit": limit}


def agent_command(python: str = "python3") -> str:
    """The shell command that starts the agent: a clean environment, an isolated Python."""
    argv = ["/usr/bin/env", "-i", f"PATH={CLEAN_PATH}", "LANG=C.UTF-8", python, "-I", "-c"]
    return f"{shlex.join(argv)} {shlex.quote(BOOTSTRAP)}"


def agent_stdin(request: AgentRequest) -> bytes:
    return b"%d\n" % len(AGENT_SOURCE) + AGENT_SOURCE + request.to_json()


def run_agent(
    connection: RemoteShell,
    request: AgentRequest,
    *,
    python: str = "python3",
    timeout: float | None = None,
) -> AgentReply:
    """One poll: send the agent and `request` to a fresh interpreter, read its reply.

    A login that prints past the reply's limit is cut there (`OutputCapExceeded`).
    """
    deadline = timeout if timeout is not None else request.timeout
    result = connection.run(
        agent_command(python),
        stdin=agent_stdin(request),
        timeout=deadline,
        max_output=request.reply_limit,
    )
    return _parse(connection.endpoint, result)


def _parse(endpoint: Endpoint, result: CommandResult) -> AgentReply:
    where = f"on cluster {endpoint.cluster_name!r} as {endpoint.username!r}"
    stderr = result.error_text.strip()[-2000:]
    if result.exit_status == 127 and not result.stdout:
        raise AgentError(
            f"The portal agent cannot start {where}: {stderr} (is python3 in {CLEAN_PATH}?)",
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
                entries=tuple(
                    ListingEntry(**{**e, "marks": tuple(e.get("marks", ()))}) for e in v["entries"]
                ),
                error=v["error"],
                truncated=v["truncated"],
            )
            for k, v in document["listings"].items()
        },
    )
