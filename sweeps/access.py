"""Who may see a sweep (its project's members, staff) and who may steer it."""

from django.db.models import QuerySet

from portal_lib.viewers import Viewer, signed_in
from projects.access import owns, projects_visible_to
from sweeps.errors import SweepPermissionRefused
from sweeps.models import Sweep


def sweeps_visible_to(*, user: Viewer | None) -> QuerySet[Sweep]:
    return Sweep.objects.filter(project__in=projects_visible_to(user=user))


def sweep_for_viewer(*, user: Viewer | None, sweep_id: int) -> Sweep | None:
    return (
        sweeps_visible_to(user=user)
        .select_related("project", "user", "cluster", "code")
        .filter(pk=sweep_id)
        .first()
    )


def can_steer(*, user: Viewer | None, sweep: Sweep) -> bool:
    """Pause, resume or stop the sweep or one trial: its submitter or a project owner."""
    if not signed_in(user):
        return False
    return sweep.user_id == user.pk or owns(user=user, project_id=sweep.project_id)


def require_steerer(*, user: Viewer | None, sweep: Sweep) -> None:
    if not can_steer(user=user, sweep=sweep):
        raise SweepPermissionRefused(
            "Only the sweep's submitter or an owner of its project may change it."
        )
