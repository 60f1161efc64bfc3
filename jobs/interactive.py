"""A JupyterLab session as a job: how its batch script starts the server, and what it leaves.

The server listens on the node's loopback at a port it picks, with a fresh token;
the script writes both into SESSION_FILE (mode 0600, the user's only) before it
starts the server, and the portal reads that file over the user's own login.
The token reaches the server through its environment (JUPYTER_TOKEN), never its
command line, which every user of the node sees in `ps`. What the file says is
only believed as far as its shape: a port number and a hexadecimal token.
"""

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import TypeGuard

from clusters.ssh import Connection
from jobs.models import Attempt, Job

SESSION_FILE = "session.json"
# The server's own Jupyter config, in the run directory (the portal's files, not the user's):
# searched first through JUPYTER_CONFIG_PATH, it turns off JupyterLab's news prompt.
LAB_CONFIG_DIR = "jupyter-config"
# The documented switch-off of the news prompt ("Would you like to get notified about official
# Jupyter news?"): the announcements plugin disabled. In 4.x the prompt shows whenever the
# user never answered, even with the news feed off (LabApp.news_url=None).
ANNOUNCEMENTS_PLUGIN = "@jupyterlab/apputils-extension:announcements"
_TOKEN = re.compile(r"^[0-9a-f]{32,128}$")
# A session file is a line of JSON; anything longer is not one the script wrote.
MAX_SESSION_FILE_BYTES = 1024
_NODE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,254}$")


def lab_base_url(job_id: int) -> str:
    """Where the portal serves the session, and so the server's base URL: its links work."""
    return f"/sessions/{int(job_id)}/lab/"


@dataclass(frozen=True)
class LabAddress:
    """The port and token a session's script wrote."""

    port: int
    token: str = field(repr=False)


def session_port_valid(port: object) -> TypeGuard[int]:
    """A port a session's server may listen on: an int, unprivileged (1024-65535)."""
    return type(port) is int and 1024 <= port <= 65535


def parse_session_file(data: bytes) -> LabAddress | None:
    """The file's port and token, or None for anything the script would not have written."""
    if len(data) > MAX_SESSION_FILE_BYTES:
        return None
    try:
        value = json.loads(data)
    except ValueError:
        return None
    if not isinstance(value, dict):
        return None
    port, token = value.get("port"), value.get("token")
    if not session_port_valid(port):
        return None
    if not isinstance(token, str) or not _TOKEN.match(token):
        return None
    return LabAddress(port=port, token=token)


def session_node(attempt: Attempt) -> str | None:
    """The one node the session runs on, as Slurm named it in the poll; None before it is known."""
    node = attempt.node_list.strip()
    return node if _NODE.match(node) else None


def session_address_read(
    connection: Connection, *, attempt: Attempt, timeout: float
) -> LabAddress | None:
    """The attempt's session file, read over its owner's login; None while it has none.

    Raises ClusterError when the login fails.
    """
    path = f"{attempt.run_dir.rstrip('/')}/{SESSION_FILE}"
    result = connection.run(
        f"cat -- {shlex.quote(path)}", timeout=timeout, max_output=MAX_SESSION_FILE_BYTES + 1024
    )
    return parse_session_file(result.stdout) if result.exit_status == 0 else None


def session_command_lines(job: Job) -> list[str]:
    """The batch script's command for a session: the server on loopback, its port and token
    written for the portal first. The job's command (`jupyter lab`) is the program; the
    portal adds the flags."""
    program = job.command.strip()
    pick_port = (
        "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"
    )
    flags = [
        "--no-browser",
        "--ip=127.0.0.1",
        '--port="$portal_lab_port"',
        "--port-retries=0",
        f"--ServerApp.base_url={shlex.quote(lab_base_url(job.pk))}",
        # The notebooks' root is the command's working directory (the code, a set-up's `cd`,
        # else the home directory), the one the workdir file names, whatever a config says.
        '--ServerApp.root_dir="$PWD"',
        # No news feed, no "newer version" prompt: a session is no place for either.
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    page_config = json.dumps({"disabledExtensions": {ANNOUNCEMENTS_PLUGIN: True}})
    config_dir = f'"$PORTAL_RUN_DIR/{LAB_CONFIG_DIR}"'
    return [
        "# --- JupyterLab session: this node's loopback, a free port, a fresh token ---",
        f'portal_lab_port="$(python3 -c {shlex.quote(pick_port)})" || exit 1',
        "portal_lab_token=\"$(od -An -N32 -tx1 /dev/urandom | tr -d ' \\n')\" || exit 1",
        "# Readable by this user only; written whole, then renamed into place.",
        '( umask 077 && printf \'{"port": %s, "token": "%s"}\\n\''
        ' "$portal_lab_port" "$portal_lab_token"'
        f' > "$PORTAL_RUN_DIR/.{SESSION_FILE}.tmp" ) || exit 1',
        f'mv -f -- "$PORTAL_RUN_DIR/.{SESSION_FILE}.tmp" "$PORTAL_RUN_DIR/{SESSION_FILE}"'
        " || exit 1",
        "# The news prompt off, by the server's own config: the user's files stay as they are.",
        f"mkdir -p -- {config_dir}/labconfig || exit 1",
        f"printf '%s\\n' {shlex.quote(page_config)} > {config_dir}/labconfig/page_config.json"
        " || exit 1",
        f'export JUPYTER_CONFIG_PATH={config_dir}"${{JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}}"',
        f'JUPYTER_TOKEN="$portal_lab_token" {program} {" ".join(flags)}',
    ]
