"""Where the agent's tests find the agent script and the cluster-side Python."""

import os
from pathlib import Path

AGENT = Path(__file__).resolve().parents[2] / "clusters" / "agent" / "portal_agent.py"
# The cluster's Python, not the portal's virtualenv; AGENT_TEST_PYTHON runs the suite on another.
PYTHON = os.environ.get("AGENT_TEST_PYTHON", "/usr/bin/python3")
