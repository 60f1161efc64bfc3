from django.contrib.auth.models import User
from django.db.models import QuerySet

from accounts.models import PersonalToken


def tokens_of(*, user: User) -> QuerySet[PersonalToken]:
    """The user's tokens, newest first (revoked and expired ones too, marked so)."""
    return PersonalToken.objects.filter(user_id=user.pk).order_by("-created_at", "-id")
