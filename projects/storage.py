"""A project's code storage: the bytes its code snapshots keep, against its quota.

Each project is charged for the archives it holds, even where another project holds
the same bytes (stored once on disk): what one project keeps never depends on another.
"""

from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db.models import Sum

from projects.models import Project

MIB = 1024 * 1024


@dataclass(frozen=True)
class CodeStorage:
    """Bytes of code snapshots a project keeps, and its quota."""

    used: int
    quota: int

    @property
    def left(self) -> int:
        return max(self.quota - self.used, 0)

    @property
    def percent_used(self) -> int:
        if self.quota <= 0:
            return 100 if self.used else 0
        return round(self.used * 100 / self.quota)

    @property
    def summary(self) -> str:
        """As the project page and the admin show it: 120.0 MiB of 2.0 GiB (6 %)."""
        return f"{fmt_bytes(self.used)} of {fmt_bytes(self.quota)} ({self.percent_used} %)"

    @property
    def left_text(self) -> str:
        return fmt_bytes(self.left)

    def fits(self, size: int) -> bool:
        return self.used + size <= self.quota


def code_quota_bytes(project: Project) -> int:
    """The project's code storage quota: its own, else the site's (CODE_QUOTA_BYTES)."""
    if project.code_quota_mib is not None:
        return project.code_quota_mib * MIB
    return int(settings.CODE_QUOTA_BYTES)


def projects_code_storage(*, projects: Iterable[Project]) -> dict[int, CodeStorage]:
    """Each project's code storage, in one query whatever their number."""
    projects = list(projects)
    used = dict(
        Project.objects.filter(pk__in=[p.pk for p in projects])
        .annotate(used=Sum("code_snapshots__size"))
        .values_list("pk", "used")
    )
    return {
        p.pk: CodeStorage(used=int(used.get(p.pk) or 0), quota=code_quota_bytes(p))
        for p in projects
    }


def project_code_storage(*, project: Project) -> CodeStorage:
    return projects_code_storage(projects=[project])[project.pk]


def code_storage_refusal_message(
    *, project: Project, storage: CodeStorage, size: int, unused: str
) -> str:
    """Why an archive of `size` bytes does not fit: the quota, the usage, what the project
    keeps unused (`unused`: the caller knows jobs) and what to do."""
    return (
        f"Project {project.slug} keeps {fmt_bytes(storage.used)} of code snapshots of its "
        f"{fmt_bytes(storage.quota)} quota; this archive ({fmt_bytes(size)}) does not fit in "
        f"the {fmt_bytes(storage.left)} left. {unused} Leave data and checkpoints out of the "
        "archive, or ask an administrator to raise the project's code storage quota."
    )


def fmt_bytes(size: int) -> str:
    """Bytes as people read them: 512 B, 12.3 KiB, 120.0 MiB, 2.0 GiB."""
    if size < 1024:
        return f"{size} B"
    value = size / 1024
    for unit in ("KiB", "MiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GiB"
