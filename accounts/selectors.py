from django.contrib.auth.models import User
from django.db.models import QuerySet

from accounts.models import ExternalIdentity, PersonalToken


def tokens_of(*, user: User) -> QuerySet[PersonalToken]:
    """The user's tokens, newest first (revoked and expired ones too, marked so)."""
    return PersonalToken.objects.filter(user_id=user.pk).order_by("-created_at", "-id")


def cluster_username_for(user: User) -> str | None:
    """The user's name on the clusters, as their single sign-on provider last gave it.

    None for a local account, or where the provider gave no name a cluster would take. Of
    several identities (OpenID Connect and LDAP), the one they signed in with last.
    """
    name = (
        ExternalIdentity.objects.filter(user_id=user.pk)
        .exclude(cluster_username="")
        .order_by("-last_sign_in_at", "-id")
        .values_list("cluster_username", flat=True)
        .first()
    )
    return name or None
