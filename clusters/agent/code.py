"""Unpacking a code snapshot on the cluster: `code_unpack.py`, run like the agent.

The unpacker's source goes on stdin to the same isolated interpreter the agent
uses (`agent_command`), so the rules that refuse `../`, absolute names and links
out of the directory are the file the portal checked the upload with, and
nothing in the account can replace them.
"""

from pathlib import Path
from typing import Protocol

from clusters.agent.client import RemoteShell
from clusters.agent.scripts import run_script


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
    reply = run_script(
        connection,
        source=UNPACK_SOURCE,
        request=request,
        timeout=UNPACK_TIMEOUT,
        what="code unpacker",
    )
    return {"files": int(reply["files"]), "bytes": int(reply["bytes"])}
