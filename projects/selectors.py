from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import AnonymousUser
from django.db.models import QuerySet

from projects.models import Project


def project_list_for_user(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Project]:
    """Projects the user belongs to, with their quota, in one query."""
    return Project.objects.filter(memberships__user_id=user.pk).select_related("quota")
