"""Whether a live stream's viewer may still follow its job, and telling streams to ask again.

A stream checks its viewer when it opens, at every heartbeat, and as soon as
something may have taken access away: a token revoked, a logout, a membership
removed. Those events reach every web process through the channel layer: each
user has a group `viewer.<id>` that their WebSockets join; SSE streams re-check
every ACCESS_CHECK_SECONDS on their own (see web.live.streams).
"""

from dataclasses import dataclass
from importlib import import_module
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete

from accounts.models import PersonalToken
from jobs.access import can_view_job
from jobs.models import Job
from portal_lib.viewers import viewer_access_changed
from projects.models import Membership

# The channel-layer message a viewer's streams get when their access may have changed.
ACCESS_CHANGED = "viewer.access_changed"


@dataclass(frozen=True)
class StreamViewer:
    """Who opened a stream, and with what: a personal token or a browser session."""

    user_id: int
    token_id: int | None = None
    session_key: str | None = None


def viewer_group(user_id: int) -> str:
    return f"viewer.{user_id}"


def viewer_may_follow(*, viewer: StreamViewer, job_id: int) -> bool:
    """Still signed in the way the stream opened (token live, session there) and may see the job."""
    user = get_user_model().objects.filter(pk=viewer.user_id, is_active=True).first()
    if user is None:
        return False
    if viewer.token_id is not None:
        token = PersonalToken.objects.filter(pk=viewer.token_id, user_id=user.pk).first()
        if token is None or not token.is_usable:
            return False
    elif viewer.session_key is None or not _session_exists(viewer.session_key):
        return False  # logged out (the session is flushed) or never signed in
    job = Job.objects.filter(pk=job_id).only("pk", "project_id").first()
    return job is not None and can_view_job(user=user, job=job)


def _session_exists(session_key: str) -> bool:
    store = import_module(settings.SESSION_ENGINE).SessionStore
    return bool(store().exists(session_key))


def viewer_notify(user_id: int, ended_session: str | None = None) -> None:
    """Tell every live stream of the user, in any web process, to check its viewer now.

    `ended_session`: a session being logged out; Django sends the logout signal before
    it deletes the session, so its streams are told to end rather than to check.
    """
    layer = get_channel_layer()
    if layer is not None:
        message = {"type": ACCESS_CHANGED, "ended_session": ended_session}
        async_to_sync(layer.group_send)(viewer_group(user_id), message)


def _on_access_changed(sender: Any, user_id: int, **kwargs: Any) -> None:
    viewer_notify(user_id)


def _on_logged_out(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    if user is not None and user.pk is not None:
        session = getattr(request, "session", None)
        viewer_notify(user.pk, ended_session=getattr(session, "session_key", None))


def _on_membership_deleted(sender: Any, instance: Membership, **kwargs: Any) -> None:
    # After the commit: a stream that re-checks sooner would still see the membership.
    user_id = instance.user_id
    transaction.on_commit(lambda: viewer_notify(user_id))


def connect_receivers() -> None:
    """Called once from MonitoringConfig.ready(); the uids keep a second call harmless."""
    viewer_access_changed.connect(_on_access_changed, dispatch_uid="streams-access-changed")
    user_logged_out.connect(_on_logged_out, dispatch_uid="streams-logged-out")
    post_delete.connect(
        _on_membership_deleted, sender=Membership, dispatch_uid="streams-membership-deleted"
    )
