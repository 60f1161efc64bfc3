"""The portal agent: a stdlib-only script run on a cluster's login node once per poll."""

from .client import (
    AGENT_HASH,
    AGENT_SOURCE,
    AgentCommand,
    AgentError,
    AgentReply,
    AgentRequest,
    CommandOutput,
    FileChunk,
    FileRead,
    Listing,
    ListingEntry,
    ListingRead,
    RemoteShell,
    agent_remote_path,
    ensure_agent,
    run_agent,
)

__all__ = [
    "AGENT_HASH",
    "AGENT_SOURCE",
    "AgentCommand",
    "AgentError",
    "AgentReply",
    "AgentRequest",
    "CommandOutput",
    "FileChunk",
    "FileRead",
    "Listing",
    "ListingEntry",
    "ListingRead",
    "RemoteShell",
    "agent_remote_path",
    "ensure_agent",
    "run_agent",
]
