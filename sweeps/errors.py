from portal_lib.errors import PermissionRefused, PortalError


class SweepError(PortalError):
    """A sweep that cannot be made or changed as asked; the message says what to change."""

    code = "sweep_invalid"


class SweepPermissionRefused(PermissionRefused):
    code = "sweep_permission_denied"
