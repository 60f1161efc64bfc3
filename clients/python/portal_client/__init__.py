"""A client for the GPU portal's REST API: `Portal(url, token)`, then jobs."""

from portal_client.client import Portal, PortalError
from portal_client.job import FINAL_STATES, Job
from portal_client.packing import PackError, pack

__all__ = ["FINAL_STATES", "Job", "PackError", "Portal", "PortalError", "pack"]
__version__ = "0.1.0"
