"""Who may operate a cluster: draining a node is for staff only."""

from portal_lib.viewers import Viewer, is_staff


def can_drain(*, user: Viewer | None) -> bool:
    return is_staff(user)


def can_check_readiness(*, user: Viewer | None) -> bool:
    """Running a cluster's readiness check starts test jobs on it: staff only."""
    return is_staff(user)
