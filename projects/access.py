"""Who may see a project and what their role lets them do; which clusters they may use."""

from django.db.models import Exists, OuterRef, Q, QuerySet

from clusters.models import Cluster
from portal_lib.viewers import Viewer, sees_everything, signed_in
from projects.models import Membership, Project, Quota

SUBMIT_ROLES = (Membership.Role.OWNER, Membership.Role.MEMBER)


def projects_visible_to(*, user: Viewer | None) -> QuerySet[Project]:
    """Projects the user is a member of (any role); every project for staff."""
    if not signed_in(user):
        return Project.objects.none()
    if sees_everything(user):
        return Project.objects.all()
    return Project.objects.filter(memberships__user_id=user.pk)


def projects_of_member(*, user: Viewer | None) -> QuerySet[Project]:
    """Projects the user belongs to (any role), staff or not: where they have a role."""
    if not signed_in(user):
        return Project.objects.none()
    return Project.objects.filter(memberships__user_id=user.pk)


def member_of(*, user: Viewer | None, project_ref: str = "pk") -> Exists:
    """A filter for rows whose project (`project_ref`) the user belongs to, any role."""
    user_id = user.pk if signed_in(user) else 0
    return Exists(Membership.objects.filter(project=OuterRef(project_ref), user_id=user_id))


def membership(*, user: Viewer | None, project_id: int) -> Membership | None:
    if not signed_in(user):
        return None
    return Membership.objects.filter(user_id=user.pk, project_id=project_id).first()


def can_submit_in(*, user: Viewer | None, project_id: int) -> bool:
    """Owners and members submit; viewers only look (staff too need a role)."""
    found = membership(user=user, project_id=project_id)
    return found is not None and found.can_submit


def submittable_projects(*, user: Viewer | None) -> QuerySet[Project]:
    """Projects where the user may submit (owner or member)."""
    if not signed_in(user):
        return Project.objects.none()
    return Project.objects.filter(
        memberships__user_id=user.pk, memberships__role__in=SUBMIT_ROLES
    ).order_by("slug")


def owns(*, user: Viewer | None, project_id: int) -> bool:
    found = membership(user=user, project_id=project_id)
    return found is not None and found.role == Membership.Role.OWNER


def in_any_project(*, user: Viewer | None) -> bool:
    """Members of at least one project, and staff: who may see the clusters at all."""
    if sees_everything(user):
        return True
    return signed_in(user) and Membership.objects.filter(user_id=user.pk).exists()


def clusters_for_project(*, project: Project) -> QuerySet[Cluster]:
    """Clusters the project may use: its quota's allowed ones (a quota naming none: all)."""
    allowed = Quota.allowed_clusters.through.objects.filter(quota__project_id=project.pk)
    return Cluster.objects.filter(
        ~Exists(allowed) | Exists(allowed.filter(cluster_id=OuterRef("pk")))
    ).order_by("name")


def clusters_for_user(*, user: Viewer | None) -> QuerySet[Cluster]:
    """Clusters one of the user's projects may use (a quota naming no clusters allows all)."""
    clusters = Cluster.objects.order_by("name")
    if sees_everything(user):
        return clusters
    if not signed_in(user):
        return clusters.none()
    mine = Membership.objects.filter(user_id=user.pk)
    unrestricted = mine.filter(
        Q(project__quota__isnull=True) | Q(project__quota__allowed_clusters__isnull=True)
    )
    allowed = Quota.allowed_clusters.through.objects.filter(
        quota__project__memberships__user_id=user.pk, cluster_id=OuterRef("pk")
    )
    return clusters.filter(Q(Exists(unrestricted)) | Q(Exists(allowed)))
