"""Who may operate a cluster: draining a node is for staff only."""

from portal_lib.viewers import Viewer, is_staff


def can_drain(*, user: Viewer | None) -> bool:
    return is_staff(user)
