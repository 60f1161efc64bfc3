"""The portal agent: a stdlib-only script sent to a cluster's login node once per poll."""

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
    agent_command,
    agent_stdin,
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
    "agent_command",
    "agent_stdin",
    "run_agent",
]
