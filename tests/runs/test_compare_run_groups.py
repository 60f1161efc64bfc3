"""Compare grouped by the runs' own groups (their notes): one mean line and a ± 1 std band
per group; a run without a group stands alone, named."""

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.models import Job
from jobs.services import job_annotate
from projects.models import Project
from tests.runs.test_runs_table import _run


@pytest.fixture
def seeds(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    """Two seeds of group lr-3e-4 (losses 2,1 and 2,3) and one run without a group."""
    made = []
    for i, (last, group) in enumerate(((1.0, "lr-3e-4"), (3.0, "lr-3e-4"), (5.0, ""))):
        job, _ = _run(project, owner, cluster, f"seed-{i}", f"t.py --seed {i}", [2.0, last])
        made.append(job_annotate(job=job, user=owner, group=group))
    return made


def test_groups_are_the_runs_own_with_mean_and_spread(
    client: Client, member: User, seeds: list[Job]
) -> None:
    client.force_login(member)
    ids = ",".join(str(job.pk) for job in seeds)
    response = client.get(
        reverse("project-compare-curves", args=["vision"]),
        {"runs": ids, "metric": "loss", "width": "3", "group": "@group"},
    )
    groups = {g["label"]: g for g in json.loads(response.content)["groups"]}
    alone = f"seed-2 #{seeds[2].pk}"
    assert set(groups) == {"lr-3e-4", alone}
    pair = groups["lr-3e-4"]
    assert pair["runs"] == [seeds[0].pk, seeds[1].pk]
    assert pair["x"] == [1.0, 1.5, 2.0]
    assert pair["mean"] == pytest.approx([2.0, 2.0, 2.0])  # (2,1) and (2,3) meet at 2
    assert pair["lo"] == pytest.approx([2.0, 1.5, 1.0])  # mean - std: std 0, 0.5, 1
    assert pair["hi"] == pytest.approx([2.0, 2.5, 3.0])
    assert groups[alone]["runs"] == [seeds[2].pk] and groups[alone]["mean"][-1] == 5.0


def test_the_page_offers_the_runs_groups_only_when_they_have_some(
    client: Client, member: User, seeds: list[Job]
) -> None:
    client.force_login(member)
    url = reverse("project-compare", args=["vision"])
    html = client.get(url, {"runs": f"{seeds[0].pk},{seeds[2].pk}", "group": "@group"}).content
    assert b'<option value="@group" selected>the runs\' groups</option>' in html
    ungrouped = client.get(url, {"runs": str(seeds[2].pk)}).content
    assert b'value="@group"' not in ungrouped
