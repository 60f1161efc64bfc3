"""Compare: curves downsampled to the chart's width with every spike kept, groups, the diff."""

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.models import Job
from monitoring.runs.compare.bands import group_bands, settings_diff
from monitoring.runs.compare.curves import Axis, Curve, _read_one, chart_points, curves_read
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories

# Enough that a 50-pixel chart reads chunk summaries, not raw points (monitoring.series.read).
POINTS = 40_000
SPIKE_AT = 31_234


def _job(project: Project, user: User, cluster: Cluster, name: str, params: dict) -> Job:
    job, attempt = factories.job(project, user, cluster, name=name, params=params)
    steps = np.arange(POINTS, dtype=np.float64)
    loss = 2.0 / np.sqrt(steps + 1)
    if name == "spiky":
        loss[SPIKE_AT] = 50.0  # one step, one point
    series_append(
        points=[(attempt.pk, "loss", float(x), float(y)) for x, y in zip(steps, loss, strict=True)]
    )
    return job


@pytest.fixture
def pair(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    return [
        _job(project, owner, cluster, "spiky", {"lr": 0.1, "seed": 1, "opt": "adam"}),
        _job(project, owner, cluster, "calm", {"lr": 0.1, "seed": 2, "opt": "adam"}),
    ]


def test_a_one_step_spike_survives_downsampling(pair: list[Job]) -> None:
    spiky, calm = curves_read(jobs=pair, metric="loss", width=50)
    assert spiky.total == POINTS
    assert len(spiky.xs) <= chart_points(50) < POINTS / 100
    assert max(spiky.ys) == 50.0 and spiky.xs[spiky.ys.index(50.0)] == SPIKE_AT
    assert max(calm.ys) < 3 and calm.xs[0] == 0 and calm.xs[-1] == POINTS - 1
    # The run-by-run read (after a compaction raced the batched one) keeps it too.
    alone = _read_one(pair[0].pk, "loss", chart_points(50), Axis("step"))
    assert 50.0 in alone.ys and alone.total == POINTS


def test_groups_have_a_mean_and_a_band_across_seeds() -> None:
    xs = [0.0, 10.0]
    curves = [Curve(1, xs, [1.0, 3.0], 2), Curve(2, xs, [3.0, 5.0], 2), Curve(3, xs, [9.0, 9.0], 2)]
    groups = group_bands(curves, {1: 0.1, 2: 0.1, 3: 0.01}, width=11)
    assert [g["label"] for g in groups] == ["0.01", "0.1"]
    tenth = groups[1]
    assert tenth["runs"] == [1, 2] and len(tenth["x"]) == 11
    assert tenth["mean"][0] == 2.0 and tenth["lo"][0] == 1.0 and tenth["hi"][0] == 3.0
    assert tenth["mean"][-1] == 4.0


def test_the_diff_shows_only_what_differs(pair: list[Job]) -> None:
    pair[1].params = {**pair[1].params, "warmup": 5}
    rows = settings_diff(pair)
    assert {r["key"]: r["values"] for r in rows} == {"seed": [1, 2], "warmup": [None, 5]}


def test_the_curves_endpoint_and_the_shareable_page(
    client: Client, member: User, pair: list[Job]
) -> None:
    client.force_login(member)
    ids = f"{pair[0].pk},{pair[1].pk}"
    response = client.get(
        reverse("project-compare-curves", args=["vision"]),
        {"runs": ids, "metric": "loss", "width": "300", "group": "lr"},
    )
    body = json.loads(response.content)
    assert [r["name"] for r in body["runs"]] == ["spiky", "calm"]
    assert 50.0 in body["runs"][0]["y"]
    assert len(body["groups"]) == 1 and body["groups"][0]["runs"] == [pair[0].pk, pair[1].pk]
    page = client.get(reverse("project-compare", args=["vision"]), {"runs": ids, "group": "lr"})
    html = page.content.decode()
    assert "<code>seed</code>" in html and "<code>opt</code>" not in html
    assert "<option selected>lr</option>" in html


def test_runs_of_another_project_are_not_read(
    client: Client, member: User, pair: list[Job], other_job: Job
) -> None:
    client.force_login(member)
    response = client.get(
        reverse("project-compare-curves", args=["vision"]), {"runs": f"{other_job.pk},{pair[0].pk}"}
    )
    assert [r["id"] for r in json.loads(response.content)["runs"]] == [pair[0].pk]


def test_the_page_asks_for_its_curves_in_its_head(
    client: Client, member: User, pair: list[Job]
) -> None:
    """The head's preload names what the form holds (a group that is none of its options
    is "(each run)"), at the server's slices; that URL answers the curves, spike kept."""
    client.force_login(member)
    ids = f"{pair[0].pk},{pair[1].pk}"
    for group, asked in (("lr", "lr"), ("no-such-setting", "")):
        page = client.get(
            reverse("project-compare", args=["vision"]), {"runs": ids, "group": group}
        )
        head = page.content.decode().split("</head>")[0]
        found = re.search(
            r'<link rel="preload" as="fetch" crossorigin id="compare-curves" href="([^"]+)"', head
        )
        assert found, head
        url = urlsplit(html.unescape(found[1]))
        assert url.path == reverse("project-compare-curves", args=["vision"])
        query = parse_qs(url.query, keep_blank_values=True)
        assert query == {
            "runs": [ids], "metric": ["loss"], "group": [asked], "axis": ["step"], "width": ["1000"],
        }  # fmt: skip
    body = json.loads(client.get(url.path + "?" + url.query).content)
    assert [r["name"] for r in body["runs"]] == ["spiky", "calm"]
    assert 50.0 in body["runs"][0]["y"] and len(body["runs"][0]["x"]) <= chart_points(1000)


def test_with_no_run_picked_the_page_says_how_to_pick_some(
    client: Client, member: User, project: Project, other_job: Job
) -> None:
    """No chart, form or preload for nothing: what the page does and a link to the runs."""
    client.force_login(member)
    url = reverse("project-compare", args=["vision"])
    runs = reverse("project-runs", args=["vision"])
    for query in ({}, {"runs": ""}):
        page = client.get(url, query)
        assert page.status_code == 200
        text = page.content.decode()
        assert "<h1>Compare runs</h1>" in text and 'id="compare-empty"' in text
        assert "overlays the curves of some of this project's runs" in text
        assert "No runs picked yet." in text and "press <strong>Compare selected</strong>" in text
        assert f'<a href="{runs}" id="compare-empty-runs">project\'s runs</a>' in text
        assert "compare-curves" not in text and 'id="compare-chart"' not in text
    # A link naming only another project's run: nothing to draw either, and it says why.
    text = client.get(url, {"runs": str(other_job.pk)}).content.decode()
    assert "None of the runs this link names is a run of this project that you may see." in text
    assert 'id="compare-empty-runs"' in text and 'id="compare-chart"' not in text


def test_a_picked_run_gets_the_chart_not_the_hint(
    client: Client, member: User, pair: list[Job]
) -> None:
    client.force_login(member)
    page = client.get(reverse("project-compare", args=["vision"]), {"runs": str(pair[0].pk)})
    text = page.content.decode()
    assert "<h1>Compare 1 run</h1>" in text and 'id="compare-chart"' in text
    assert 'id="compare-empty"' not in text
