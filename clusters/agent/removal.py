"""Removing checkpoints on the cluster: `checkpoint_remove.py`, run like the agent.

Its source goes on stdin to the same isolated interpreter the agent uses
(`agent_command`), over the job's own account's connection, so the rules that keep
it inside the run directory and off links are the file in this repository, and
nothing in the account can replace them.
"""

from dataclasses import dataclass
from pathlib import Path

from clusters.agent.client import RemoteShell
from clusters.agent.scripts import run_script

REMOVE_SOURCE: bytes = Path(__file__).with_name("checkpoint_remove.py").read_bytes()
REMOVE_TIMEOUT = 300.0


@dataclass(frozen=True)
class Removal:
    removed: bool
    bytes: int  # what `du -sb` counted for it before it went
    error: str | None  # "not found", "a symbolic link: left alone", a refusal, an OS error


def remove_on_cluster(
    connection: RemoteShell, *, root: str, names: list[str]
) -> dict[str, Removal]:
    """Remove `names` (relative to the run directory `root`); each one's outcome."""
    reply = run_script(
        connection,
        source=REMOVE_SOURCE,
        request={"root": root, "names": names},
        timeout=REMOVE_TIMEOUT,
        what="checkpoint remover",
    )
    results = reply.get("results", {})
    return {
        name: Removal(
            removed=bool(results[name]["removed"]),
            bytes=int(results[name]["bytes"]),
            error=results[name]["error"],
        )
        for name in names
        if isinstance(results.get(name), dict)
    }
