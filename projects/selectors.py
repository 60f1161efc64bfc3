from django.contrib.auth.models import User
from django.db.models import QuerySet

from projects.models import Project


def project_list_for_user(*, user: User) -> QuerySet[Project]:
    """Projects the user belongs to, with their quota, in one query."""
    return Project.objects.filter(memberships__user=user).select_related("quota")
