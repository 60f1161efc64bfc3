"""The portal's one error family: a failure the user can fix, with what to tell them.

Services raise a PortalError (or a subclass); the REST API turns it into a
response in one place (`portal_lib.drf.exception_handler`) and pages into form
errors in one place (`form_add_error`).
"""

from typing import Any, ClassVar


class PortalError(Exception):
    """A request the user can fix; `message` says what to change, `errors` maps fields to it.

    `status` is the HTTP status the API answers with; `code` a stable machine name.
    """

    status: ClassVar[int] = 400
    code: ClassVar[str] = "invalid"

    def __init__(self, message: str, *, errors: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.errors = errors or {}


class PermissionRefused(PortalError):
    """The user may not do this; the message says who may."""

    status = 403
    code = "permission_denied"


class RateLimited(PortalError):
    """Too many requests for now; `retry_after` says in how many seconds to try again."""

    status = 429
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = max(int(retry_after), 1)


def form_add_error(form: Any, exc: PortalError) -> None:
    """Show the error in a Django form: under its fields where it names them, else on top."""
    for field, messages in exc.errors.items():
        for message in messages:
            form.add_error(field if field in form.fields else None, message)
    if not exc.errors:
        form.add_error(None, exc.message)
