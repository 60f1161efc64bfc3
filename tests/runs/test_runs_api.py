"""The runs table over REST: the page's parameters and query (the client: tests/clients)."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from jobs.models import Job
from projects.models import Project
from tests import factories
from tests.helpers import Tokens, bearer
from tests.runs.test_runs_table import _run

URL = "/api/v1/projects/vision/runs/"


@pytest.fixture
def sweep(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    """Three runs: lr 0.3, 0.03, 0.003 with best losses 1.2, 0.9, 0.6."""
    return [
        _run(project, owner, cluster, f"lr-{i}", f"t.py --lr {lr}", [2.0, 1.2 - 0.3 * i])[0]
        for i, lr in enumerate(("0.3", "0.03", "0.003"))
    ]


def _names(body: dict) -> list[str]:
    return [row["name"] for row in body["results"]]


def test_columns_sort_and_filters_are_the_pages(tokens: Tokens, sweep: list[Job]) -> None:
    client = bearer(tokens.viewer)
    body = client.get(URL, {"sort": "loss_best", "cols": "name,loss_best,p.lr"}).json()
    assert _names(body) == ["lr-2", "lr-1", "lr-0"]
    assert [c["key"] for c in body["columns"]] == ["name", "loss_best", "p.lr"]
    assert body["results"][0] == {
        "id": sweep[2].pk,
        "name": "lr-2",
        "loss_best": pytest.approx(0.6),
        "p.lr": 0.003,
    }
    assert body["sort"] == "loss_best" and body["count"] == 3 and not body["count_capped"]
    filtered = client.get(URL, {"f": ["p.lr<0.1", "loss_best>0.7"], "cols": "name"}).json()
    assert _names(filtered) == ["lr-1"]
    # Default columns and order: the page's (newest first).
    default = client.get(URL).json()
    assert _names(default) == ["lr-2", "lr-1", "lr-0"] and "p.lr" in default["results"][0]


def test_bad_parameters_are_400s_naming_the_parameter(tokens: Tokens, sweep: list[Job]) -> None:
    client = bearer(tokens.member)
    answers = {
        "f": client.get(URL, {"f": "loss_best<abc"}),
        "sort": client.get(URL, {"sort": "nonsense"}),
        "size": client.get(URL, {"size": 500}),
    }
    for param, response in answers.items():
        assert response.status_code == 400 and param in response.json(), param
    assert "not a number" in answers["f"].json()["f"][0]


def test_pages_follow_next_in_fixed_queries(
    client: Client, owner: User, project: Project, cluster: Cluster, sweep: list[Job],
    django_assert_num_queries,
) -> None:  # fmt: skip
    client.force_login(owner)
    client.get(URL)  # warm the session
    # session, user, the project (visible to the user), the settings' keys of the newest
    # runs, the capped count, the page's ids, its rows with summaries and users; a page
    # that reaches past the runs with a loss reads those without one: one query more.
    page: dict[str, str | int] = {"sort": "-loss_best", "f": "p.lr<100"}
    for size, queries in ((1, 7), (3, 7), (50, 8)):
        with django_assert_num_queries(queries):
            client.get(URL, {**page, "size": size})
    for i in range(12):
        factories.job(project, owner, cluster, name=f"more-{i}", params={"lr": i})
    for size, queries in ((3, 7), (50, 8), (200, 8)):
        with django_assert_num_queries(queries):
            assert len(client.get(URL, {**page, "size": size}).json()["results"]) == min(size, 15)
    first = client.get(URL, {"size": "2", "sort": "loss_best"}).json()
    assert first["pages"] == 8 and first["previous"] is None
    second = client.get(first["next"]).json()
    assert _names(first) + _names(second) == ["lr-2", "lr-1", "lr-0", "more-11"]
    assert client.get(second["previous"]).json() == first


def test_outsiders_are_refused(tokens: Tokens, sweep: list[Job]) -> None:
    assert bearer(tokens.outsider).get(URL).status_code == 404
    assert bearer(None).get(URL).status_code == 401
