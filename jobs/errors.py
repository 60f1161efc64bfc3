class JobError(Exception):
    """A request the user can fix; `errors` maps fields to what to change."""

    def __init__(self, message: str, *, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or {}
