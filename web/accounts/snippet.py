"""What the token page's Python snippet is filled with: the user's own project and cluster,
and the packages the client needs, as the client's package declares them."""

import functools
import tomllib
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from packaging.requirements import Requirement

from clusters.examples import EXAMPLE_COMMAND
from projects.access import clusters_for_project, submittable_projects
from web.jobs.forms import usable_clusters

CLIENT_PACKAGE = Path("clients") / "python"  # in the portal's repository


@dataclass(frozen=True)
class Snippet:
    project: str  # a slug the user may submit in, else a stand-in to replace
    cluster: str
    requirements: tuple[str, ...]  # the client's dependencies, by name
    command: str = EXAMPLE_COMMAND


def snippet_for(*, user: User) -> Snippet:
    """The user's first project where they may submit, and the first cluster that project
    may use and they have an account on (two queries); stand-ins where there is none."""
    project = submittable_projects(user=user).only("slug").first()
    cluster = None
    if project is not None:
        allowed = clusters_for_project(project=project).values("pk")
        cluster = usable_clusters(user=user).filter(pk__in=allowed).only("name").first()
    return Snippet(
        project=project.slug if project else "your-project",
        cluster=cluster.name if cluster else "your-cluster",
        requirements=client_requirements(settings.BASE_DIR / CLIENT_PACKAGE / "pyproject.toml"),
    )


@functools.lru_cache(maxsize=4)
def client_requirements(pyproject: Path) -> tuple[str, ...]:
    """The names of the client's dependencies from its pyproject.toml ([project] dependencies);
    none where the portal runs without the client's sources."""
    if not pyproject.is_file():
        return ()
    with pyproject.open("rb") as handle:
        declared = tomllib.load(handle).get("project", {}).get("dependencies", [])
    return tuple(Requirement(line).name for line in declared)
