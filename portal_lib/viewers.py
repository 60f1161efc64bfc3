"""Who is asking: a signed-in, active user, and the one staff rule every access module uses.

Here, in the leaf, because the access modules of every layer (clusters, projects,
jobs) read it; it knows Django's users and nothing of the apps.

The staff rule: staff may look at every project, job and cluster (to help and
to audit); of the projects' work, looking is all it gives them: submitting and
cancelling follow the project's roles for staff as for anyone. Operating the
clusters (draining a node) is staff's alone (`clusters.access`).
"""

from typing import TypeGuard

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.dispatch import Signal

# What request.user and the WebSocket scope's user can be.
Viewer = AbstractBaseUser | AnonymousUser


def signed_in(user: Viewer | None) -> TypeGuard[AbstractBaseUser]:
    # isinstance sees through the lazy user objects of sessions and Channels.
    return isinstance(user, AbstractBaseUser) and user.is_authenticated and user.is_active


def is_staff(user: Viewer | None) -> bool:
    """A signed-in staff member."""
    return signed_in(user) and bool(getattr(user, "is_staff", False))


def sees_everything(user: Viewer | None) -> bool:
    """The staff rule: a signed-in staff member may see every project, job and cluster."""
    return is_staff(user)


# Sent (with `user_id`) when a user may have lost access: a token revoked, a membership
# removed. Live streams listen (monitoring.live.access) and re-check their viewer;
# the layers below send it without knowing who listens.
viewer_access_changed = Signal()
