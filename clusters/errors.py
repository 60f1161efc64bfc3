"""The one base of every failure talking to a cluster: SSH, Slurm and the portal agent."""


class ClusterError(Exception):
    """A cluster could not do what was asked; `retryable` says whether trying later can help.

    Not a PortalError: the message may name hosts and accounts, so it is logged and
    shown to staff, and callers decide what a user sees.
    """

    def __init__(self, message: str, *, retryable: bool) -> None:
        super().__init__(message)
        self.retryable = retryable
