"""The runs table's throughput says its unit, each run's own (tokens/s, samples/s, steps/s):
on the page, in its cells, and over REST beside the value."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from monitoring.runs.summary import runs_record
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories
from tests.helpers import Tokens, bearer

# The three runs, as each trainer printed its rate.
RATES = {
    "tokens": ("tokens_per_sec", 1.28e5, "128k tokens/s"),
    "samples": ("samples_per_sec", 4982.0, "4.98k samples/s"),
    "steps": ("it_per_s", 3.3, "3.3 steps/s"),
}


@pytest.fixture
def rates(project: Project, owner: User, cluster: Cluster) -> None:
    for name, (series, value, _) in RATES.items():
        _, attempt = factories.job(project, owner, cluster, name=name)
        points = [(attempt.pk, series, float(s), value) for s in range(1, 4)]
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})


def test_the_page_prints_each_rate_with_its_unit(rates: None, client: Client, member: User) -> None:
    client.force_login(member)
    body = client.get("/projects/vision/runs/?cols=name,throughput,mfu,duration").content.decode()
    for _, _, text in RATES.values():
        assert f'<td class="num">{text}</td>' in body
    assert ">Throughput<" in body and ">MFU (%)<" in body and ">Duration (h:mm)<" in body
    assert "1.28e+05" not in body


def test_the_api_gives_the_unit_beside_the_rate(rates: None, tokens: Tokens) -> None:
    body = bearer(tokens.viewer).get("/api/v1/projects/vision/runs/", {"cols": "name,throughput"})
    rows = {row["name"]: row for row in body.json()["results"]}
    assert {name: (row["throughput"], row["throughput_unit"]) for name, row in rows.items()} == {
        "tokens": (1.28e5, "tokens/s"),
        "samples": (4982.0, "samples/s"),
        "steps": (3.3, "steps/s"),
    }
    without = bearer(tokens.viewer).get("/api/v1/projects/vision/runs/", {"cols": "name"})
    assert all("throughput_unit" not in row for row in without.json()["results"])
