"""Compare beside a diverged run: its NaN and infinite values are gaps (strict JSON), and the
default y range fits the other runs, naming the one left off, rather than flattening them
under 1.28e17 (the issue's diverged sweep trial)."""

import json
import math

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from jobs.models import Job
from monitoring.runs.compare import Curve, y_range
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories

DIVERGED = {
    **{step: 2.3 - 0.02 * step for step in range(1, 23)},
    23: 1.6e6,
    24: math.inf,
    25: math.nan,
    26: 1.28e17,
}


def _run(project: Project, user: User, cluster: Cluster, name: str, losses: dict) -> Job:
    job, attempt = factories.job(project, user, cluster, name=name)
    series_append(points=[(attempt.pk, "loss", float(s), v) for s, v in losses.items()])
    return job


@pytest.fixture
def runs(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    healthy = {step: 2.2 - 0.01 * step for step in range(1, 27)}
    return [
        _run(project, owner, cluster, "diverged", DIVERGED),
        _run(project, owner, cluster, "healthy", healthy),
        _run(project, owner, cluster, "other", {s: v + 0.1 for s, v in healthy.items()}),
    ]


def test_the_curves_carry_gaps_and_a_range_fitted_to_the_other_runs(
    runs: list[Job], project: Project, member: User, client: Client
) -> None:
    client.force_login(member)
    response = client.get(
        f"/projects/{project.slug}/compare/curves",
        {"runs": ",".join(str(job.pk) for job in runs), "metric": "loss", "width": "300"},
    )
    assert response.status_code == 200
    body = json.loads(response.content, parse_constant=pytest.fail)  # no bare NaN
    diverged = body["runs"][0]
    assert diverged["nonfinite"] == [24.0, 25.0]
    assert diverged["y"][23:] == [None, None, 1.28e17] and diverged["x"][-1] == 26.0
    low, high = body["y_range"]["range"]
    assert 1.9 < high < 2.5 and 1.8 < low < 2.0  # the healthy runs, padded
    assert body["y_range"]["off"] == [{"id": runs[0].pk, "name": "diverged", "value": 1.28e17}]


def test_no_range_is_forced_when_every_run_fits_or_one_run_is_alone() -> None:
    calm = Curve(1, [1.0, 2.0], [2.0, 1.0], 2)
    spiky = Curve(2, [1.0, 2.0], [50.0, 1.0], 2)  # a spike 25 times the others: kept in view
    assert y_range([calm, spiky]) is None
    assert y_range([Curve(3, [1.0, 2.0], [2.0, 1e17], 2)]) is None
    fitted = y_range([calm, Curve(3, [1.0, 2.0], [2.0, 1e17], 2), spiky])
    assert fitted is not None and fitted.off == [(3, 1e17)]
    assert fitted.low < 1.0 and 50.0 < fitted.high < 60.0
