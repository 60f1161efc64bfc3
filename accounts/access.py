"""Who is asking: a signed-in, active user, and the one staff rule every access module uses.

The staff rule: staff may look at every project, job and cluster (to help and
to audit); looking is all it gives them. Submitting and cancelling follow the
project's roles for staff as for anyone.
"""

from typing import TypeGuard

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser

# What request.user and the WebSocket scope's user can be.
Viewer = AbstractBaseUser | AnonymousUser


def signed_in(user: Viewer | None) -> TypeGuard[AbstractBaseUser]:
    # isinstance sees through the lazy user objects of sessions and Channels.
    return isinstance(user, AbstractBaseUser) and user.is_authenticated and user.is_active


def sees_everything(user: Viewer | None) -> bool:
    """The staff rule: a signed-in staff member may see every project, job and cluster."""
    return signed_in(user) and bool(getattr(user, "is_staff", False))
