"""The jobs app's members of the error family (portal_lib.errors)."""

from portal_lib.errors import PermissionRefused, PortalError


class JobError(PortalError):
    """A job request the user can fix; `errors` maps fields to what to change."""


class JobPermissionRefused(JobError, PermissionRefused):
    """The user may not submit or cancel here; the message says who may."""
