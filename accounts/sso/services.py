"""Writes at a single sign-on: the portal user and identity a provider's profile stands for."""

import logging

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts.models import ExternalIdentity
from accounts.sso.access import access_readmit_at_sign_in, disabled_by_directory
from accounts.sso.claims import ExternalProfile

logger = logging.getLogger(__name__)

USERNAME_MAX = 150  # Django's


def _free_username(wanted: str) -> str:
    """`wanted`, or `wanted-2`, `wanted-3` ...: never an existing user's name.

    A provider's user is never joined to a local account by name: a directory's `admin`
    must not become the portal's.
    """
    base = (wanted or "user")[: USERNAME_MAX - 8]
    name, number = base, 1
    while User.objects.filter(username=name).exists():
        number += 1
        name = f"{base}-{number}"
    return name


@transaction.atomic
def identity_sign_in(*, profile: ExternalProfile, staff: bool | None) -> User | None:
    """The portal user of the provider's issuer and subject, made at their first sign-in and
    brought up to date at each; None for a user disabled in the portal.

    A user the directory sweep disabled is the exception: the provider signing them in is
    the directory having them again, so they are readmitted. One an admin disabled is not.

    `staff`: what the groups say (None: leave it as the admin set it).
    """
    identity = (
        ExternalIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=profile.issuer, subject=profile.subject)
        .first()
    )
    if identity is None:
        user = User.objects.create_user(username=_free_username(profile.username))
        identity = ExternalIdentity(user=user, issuer=profile.issuer, subject=profile.subject)
        logger.info("new portal user %s for %s at %s", user, profile.subject, profile.issuer)
    else:
        user = identity.user
        if disabled_by_directory(user=user):
            access_readmit_at_sign_in(user=user, issuer=profile.issuer)
        elif not user.is_active:
            logger.info("sign-in refused: %s is disabled in the portal", user)
            return None
    user.email = profile.email or user.email
    user.first_name = profile.first_name or user.first_name
    user.last_name = profile.last_name or user.last_name
    if staff is not None:
        user.is_staff = staff
    user.save(update_fields=["email", "first_name", "last_name", "is_staff"])
    if profile.cluster_username is None:
        logger.warning(
            "%s at %s gave no cluster user name a cluster would take", user, profile.issuer
        )
    identity.cluster_username = profile.cluster_username or ""
    identity.groups = sorted(profile.groups)
    identity.last_sign_in_at = timezone.now()
    identity.save()
    return user
