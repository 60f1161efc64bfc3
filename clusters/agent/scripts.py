"""Running one of the agent's stdlib scripts on the cluster: its source and a JSON request on
stdin to the agent's isolated interpreter (`agent_command`), a JSON reply with `ok` back."""

import json
from typing import Any

from clusters.agent.client import AgentError, RemoteShell, agent_command


def run_script(
    connection: RemoteShell, *, source: bytes, request: dict[str, Any], timeout: float, what: str
) -> dict[str, Any]:
    """The script's reply; AgentError when it gave none (retryable) or refused (`ok` false)."""
    stdin = b"%d\n" % len(source) + source + json.dumps(request).encode()
    result = connection.run(agent_command(), stdin=stdin, timeout=timeout)
    where = f"on cluster {connection.endpoint.cluster_name!r}"
    lines = result.stdout.strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        raise AgentError(
            f"The {what} {where} gave no reply (exit status {result.exit_status}): "
            f"{result.error_text.strip()[-2000:] or 'no error output'}",
            retryable=True,
        )
    if not reply.get("ok"):
        raise AgentError(f"The {what} {where} refused: {reply.get('error')}", retryable=False)
    return reply
