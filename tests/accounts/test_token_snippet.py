"""The token page's Python snippet names the user's own project and a cluster it may use,
and what the client installs, as the client's package declares it."""

import tomllib
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.examples import EXAMPLE_COMMAND
from projects.models import Project, Quota
from tests import factories
from web.accounts.snippet import client_requirements, snippet_for

pytestmark = pytest.mark.django_db
CLIENT = Path(__file__).resolve().parents[2] / "clients" / "python" / "pyproject.toml"


def _page(user: User) -> str:
    client = Client()
    client.force_login(user)
    return client.get("/account/tokens/").content.decode()


def test_the_snippet_names_the_users_project_and_cluster(owner: User, project: Project) -> None:
    factories.account(factories.cluster("alps"), owner)
    page = _page(owner)
    assert f'project="{project.slug}",' in page and 'cluster="alps",' in page
    assert "your-project" not in page and "your-cluster" not in page
    assert f'command="{EXAMPLE_COMMAND}",' in page
    # What the client needs: every dependency its package declares, none typed by hand.
    assert "needs only httpx" not in page
    assert "which installs <code>httpx</code> and <code>pathspec</code>" in page


def test_a_cluster_the_project_may_not_use_is_not_offered(
    owner: User, project: Project, django_assert_max_num_queries: Any
) -> None:
    alps, bern = factories.cluster("alps"), factories.cluster("bern")
    for cluster in (alps, bern):
        factories.account(cluster, owner)
    Quota.objects.get(project=project).allowed_clusters.set([bern])
    with django_assert_max_num_queries(2):  # the project, the cluster
        assert snippet_for(user=owner).cluster == "bern"


def test_stand_ins_where_the_user_has_no_project(outsider: User) -> None:
    page = _page(outsider)
    assert 'project="your-project",' in page and 'cluster="your-cluster",' in page


def test_the_requirements_are_the_client_packages_own(tmp_path: Path) -> None:
    declared = tomllib.loads(CLIENT.read_text())["project"]["dependencies"]
    names = client_requirements(CLIENT)
    assert len(names) == len(declared) and {"httpx", "pathspec"} <= set(names)
    assert all(line.startswith(name) for name, line in zip(names, declared, strict=True))
    assert client_requirements(tmp_path / "absent.toml") == ()
