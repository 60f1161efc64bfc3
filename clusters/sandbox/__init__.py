"""A real one-machine Slurm cluster (munged, slurmctld, a slurmd per node, sshd) for development.

`up(state_dir)` starts it and returns what the portal needs to register it;
`down(state_dir)` stops what it started; `status(state_dir)` describes it.
Needs root; everything it writes lives under `state_dir` except the users
alice, bob and carol (with their homes) and a line in /etc/hosts naming the nodes.
`second` runs a second cluster beside it (its own controller, nodes and login node).
"""

from .cluster import SandboxInfo, down, status, up
from .system import SandboxError

__all__ = ["SandboxError", "SandboxInfo", "down", "status", "up"]
