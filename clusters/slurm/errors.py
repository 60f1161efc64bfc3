"""The one exception type Slurm failures raise, and the cases callers tell apart."""

from clusters.errors import ClusterError


class SlurmError(ClusterError):
    """A Slurm command failed; `retryable` says whether trying again later can help."""

    def __init__(self, command: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"`{command}` failed: {message}", retryable=retryable)
        self.command = command
        self.slurm_message = message


class AccountingDisabled(SlurmError):
    """sacct has no database to ask: the caller falls back to the job's exit file."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(command, message, retryable=False)


class SlurmOutputError(SlurmError):
    """Slurm printed something the parser does not understand (format or version drift)."""

    def __init__(self, command: str, message: str) -> None:
        super().__init__(command, message, retryable=False)
