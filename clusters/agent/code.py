"""Unpacking a code snapshot on the cluster: `code_unpack.py`, run like the agent.

The unpacker's source goes on stdin to the same isolated interpreter the agent
uses (`agent_command`), so the rules that refuse `../`, absolute names and links
out of the directory are the file the portal checked the upload with, and
nothing in the account can replace them.
"""

import json
from pathlib import Path
from typing import Protocol

from clusters.agent.client import AgentError, RemoteShell, agent_command


class CodeShell(RemoteShell, Protocol):
    """What placing code needs of a connection: commands and uploads (`Connection` has both)."""

    def upload(self, remote_path: str, data: bytes, *, mode: int = ...) -> None: ...


UNPACK_SOURCE: bytes = Path(__file__).with_name("code_unpack.py").read_bytes()
UNPACK_TIMEOUT = 300.0


def unpack_on_cluster(
    connection: RemoteShell, *, archive: str, dest: str, max_bytes: int, max_files: int
) -> dict[str, int]:
    """Unpack `archive` (a path on the cluster) into the new directory `dest`; deletes it."""
    request = {"archive": archive, "dest": dest, "max_bytes": max_bytes, "max_files": max_files}
    stdin = b"%d\n" % len(UNPACK_SOURCE) + UNPACK_SOURCE + json.dumps(request).encode()
    result = connection.run(agent_command(), stdin=stdin, timeout=UNPACK_TIMEOUT)
    where = f"on cluster {connection.endpoint.cluster_name!r}"
    lines = result.stdout.strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise AgentError(
            f"The code unpacker {where} gave no reply (exit status {result.exit_status}): "
            f"{result.error_text.strip()[-2000:] or 'no error output'}",
            retryable=True,
        )
    if not reply.get("ok"):
        raise AgentError(
            f"The code could not be unpacked {where}: {reply.get('error')}", retryable=False
        )
    return {"files": int(reply["files"]), "bytes": int(reply["bytes"])}
