"""Interactive sessions' settings (sessions/, docs/sessions.md), read from the environment
like the rest (`portal.settings.base` imports them)."""

import environ

env = environ.Env()

# Who opens a session besides its owner: staff too when true (default: the owner only).
SESSION_STAFF_MAY_OPEN: bool = env.bool("SESSION_STAFF_MAY_OPEN", default=False)
# A request body the proxy forwards to a session (a saved notebook, an upload), at most.
SESSION_PROXY_BODY_MAX_BYTES: int = env.int("SESSION_PROXY_BODY_MAX_BYTES", default=32 << 20)
# One WebSocket message (a kernel's output with its images), at most, either way.
SESSION_WS_MESSAGE_MAX_BYTES: int = env.int("SESSION_WS_MESSAGE_MAX_BYTES", default=32 << 20)
# Idle keep-alive connections to one session kept open over its SSH login.
SESSION_PROXY_IDLE_CONNECTIONS: int = env.int("SESSION_PROXY_IDLE_CONNECTIONS", default=8)
# How long the proxy waits for a session's answer to start.
SESSION_PROXY_TIMEOUT_SECONDS: float = env.float("SESSION_PROXY_TIMEOUT_SECONDS", default=60.0)
# How often JupyterLab's page asks the portal for the session's notices (idle, time limit).
SESSION_NOTICE_SECONDS: float = env.float("SESSION_NOTICE_SECONDS", default=20.0)
