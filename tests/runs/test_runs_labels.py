"""The runs table's tags and group: columns, filters in the URL (tags=x, group=x), quick
filters, the same query count, and the API's rows."""

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from clusters.models import Cluster
from jobs.models import Job
from jobs.services import job_annotate
from monitoring.runs.table import RunsQueryError, parse_filter, runs_filtered
from projects.models import Project
from tests.helpers import Tokens, bearer
from tests.runs.test_runs_table import _order, _run, _table


@pytest.fixture
def labelled(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    """Four runs: two seeds of group lr-3e-4 (one tagged baseline), one tagged best, one bare."""
    labels = [
        (["baseline", "v1"], "lr-3e-4"),
        ([], "lr-3e-4"),
        (["best"], "lr-1e-3"),
        ([], ""),
    ]
    made = []
    for i, (tags, group) in enumerate(labels):
        job, _ = _run(project, owner, cluster, f"run-{i}", f"t.py --seed {i}", [2.0, 1.0 + i])
        made.append(job_annotate(job=job, user=owner, tags=tags, group=group))
    return made


def test_filter_by_tag_and_by_group(client: Client, member: User, labelled: list[Job]) -> None:
    client.force_login(member)
    assert _order(_table(client, f="tags=baseline"), labelled) == ["run-0"]
    assert _order(_table(client, f="tags=BEST"), labelled) == ["run-2"]  # tags are lower-case
    assert _order(_table(client, f="tags!=baseline", sort="name"), labelled) == [
        "run-1",
        "run-2",
        "run-3",
    ]
    assert _order(_table(client, f="tags~bas"), labelled) == ["run-0"]
    assert _order(_table(client, f="group=lr-3e-4", sort="name"), labelled) == ["run-0", "run-1"]
    assert _order(_table(client, f=["group=lr-3e-4", "tags=v1"]), labelled) == ["run-0"]
    assert _order(_table(client, f="group~1e-3"), labelled) == ["run-2"]
    # Sorted by group: the run without one first (ascending), then by group, ties by id.
    assert _order(_table(client, sort="group"), labelled) == ["run-3", "run-2", "run-0", "run-1"]
    assert "filter them: tags=baseline" in _table(client, sort="tags")
    assert "Filter tags with =" in _table(client, f="tags<3")
    assert "Filter tags with =" in _table(client, f='tags="x')


def test_the_table_shows_tags_and_group_as_links_that_add_their_filter(
    client: Client, member: User, labelled: list[Job]
) -> None:
    client.force_login(member)
    html = _table(client, f="group=lr-3e-4")
    assert 'class="run-tag" href="?f=group%3Dlr-3e-4&amp;page=1&amp;f=tags%3Dbaseline"' in html
    assert 'class="run-group" href="?f=group%3Dlr-3e-4&amp;page=1&amp;f=group%3Dlr-3e-4"' in html
    # The quick filters offer every tag and group of the newest runs.
    assert '<select id="runs-tag-filter" data-filter="tags"><option value="">any</option>' in html
    assert "<option>baseline</option><option>best</option><option>v1</option>" in html
    assert "<option>lr-1e-3</option><option>lr-3e-4</option>" in html


def test_tags_filter_through_the_gin_index_on_postgresql(labelled: list[Job]) -> None:
    runs = runs_filtered(project=labelled[0].project, filters=[parse_filter("tags=best")])
    if connection.vendor == "postgresql":
        assert '"jobs_job"."tags" @>' in str(runs.query)
    assert [job.name for job in runs] == ["run-2"]
    with pytest.raises(RunsQueryError, match="Filter tags"):
        parse_filter("tags>=best")


def test_a_tag_filter_costs_the_tables_usual_queries(
    client: Client, member: User, labelled: list[Job], django_assert_num_queries
) -> None:
    client.force_login(member)
    _table(client)  # warm the session
    # session, user, project, the newest runs' settings, tags and groups, the capped count,
    # the page's ids, its rows with summaries and users.
    with django_assert_num_queries(7):
        _table(client, f=["tags=baseline", "group=lr-3e-4"])


def test_the_api_rows_carry_tags_and_group(tokens: Tokens, labelled: list[Job]) -> None:
    body = bearer(tokens.viewer).get("/api/v1/projects/vision/runs/", {"f": "tags=v1"}).json()
    (row,) = body["results"]
    assert (row["name"], row["tags"], row["group"]) == ("run-0", ["baseline", "v1"], "lr-3e-4")
    refused = bearer(tokens.viewer).get("/api/v1/projects/vision/runs/", {"sort": "tags"})
    assert refused.status_code == 400 and "sort" in refused.json()
