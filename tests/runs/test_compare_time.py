"""Compare by time: each attempt's steps through its clock (start, pace, end), in the URL."""

import json
from datetime import UTC, datetime

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.models import Attempt, Job
from monitoring.models import AttemptProgress, LogFile
from monitoring.runs.compare import curves_read
from monitoring.runs.step_clock import AttemptTimes, attempt_clock
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories

T0 = 1_800_000_000.0
GPU = "gpu/n1/0/utilization"


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, tz=UTC)


@pytest.fixture
def resumed(project: Project, owner: User, cluster: Cluster) -> Job:
    """Attempt 1: steps 0..100 in 100 s, step 50 reached at 20 s (its pace sample); attempt 2,
    after a 100 s gap, resumes at step 80 and reaches 120 in 40 s (no pace: start and end)."""
    job, first = factories.job(project, owner, cluster, name="resumed", params={"lr": 0.1})
    first.started_at, first.ended_at = _at(0), _at(100)
    first.save()
    AttemptProgress.objects.create(attempt=first, pace=[[T0 + 20, 50]])
    LogFile.objects.create(attempt=first, name="stdout.log", last_step=100)
    second = Attempt.objects.create(job=job, number=2, started_at=_at(200), ended_at=_at(240))
    LogFile.objects.create(attempt=second, name="stdout.log", last_step=120)
    points = [(first.pk, "loss", float(s), float(s)) for s in range(101)]
    points += [(second.pk, "loss", float(s), 1000.0 + s) for s in range(80, 121)]
    points += [(first.pk, GPU, T0 + 10, 1.0), (first.pk, GPU, T0 + 60, 2.0)]
    series_append(points=points)
    return job


def _x_by_y(job: Job, metric: str, axis: str) -> dict[float, float]:
    (curve,) = curves_read(jobs=[job], metric=metric, width=900, axis=axis)
    return dict(zip(curve.ys, curve.xs, strict=True))


def test_time_since_the_start_follows_each_attempts_pace(resumed: Job) -> None:
    x = _x_by_y(resumed, "loss", "elapsed")
    # 0.4 s a step up to the pace sample (step 50 at 20 s), then 1.6 s a step to the end.
    assert x[0.0] == 0.0 and x[25.0] == pytest.approx(10.0) and x[50.0] == pytest.approx(20.0)
    assert x[75.0] == pytest.approx(60.0) and x[100.0] == pytest.approx(100.0)
    # The restart is drawn after the gap, its redone steps 80..100 included.
    assert x[1080.0] == pytest.approx(200.0) and x[1120.0] == pytest.approx(240.0)
    assert x[1100.0] == pytest.approx(220.0)


def test_wall_clock_time_and_step(resumed: Job) -> None:
    wall = _x_by_y(resumed, "loss", "wall")
    assert wall[75.0] == pytest.approx(T0 + 60) and wall[1120.0] == pytest.approx(T0 + 240)
    step = _x_by_y(resumed, "loss", "step")
    assert step[75.0] == 75.0 and step[1090.0] == 90.0


def test_gpu_series_are_by_time_and_go_back_through_the_clock_for_steps(resumed: Job) -> None:
    assert _x_by_y(resumed, GPU, "elapsed") == {1.0: 10.0, 2.0: 60.0}
    assert _x_by_y(resumed, GPU, "wall") == {1.0: T0 + 10, 2.0: T0 + 60}
    step = _x_by_y(resumed, GPU, "step")
    assert step[1.0] == pytest.approx(25.0) and step[2.0] == pytest.approx(75.0)


def test_a_run_that_never_started_has_no_time_curve(
    project: Project, owner: User, cluster: Cluster
) -> None:
    job, attempt = factories.job(project, owner, cluster)
    series_append(points=[(attempt.pk, "loss", 1.0, 0.5)])
    (curve,) = curves_read(jobs=[job], metric="loss", width=100, axis="elapsed")
    assert curve.xs == [] and curve.total == 1


def test_a_running_attempt_is_clocked_to_now_unless_its_pace_reached_the_step() -> None:
    running = AttemptTimes(job_id=1, started=0.0, ended=None, last_step=100.0, pace=())
    clock = attempt_clock(running, first_step=0.0, last_step=100.0, now=50.0)
    assert clock is not None and clock.times_at(np.array([50.0])).tolist() == [25.0]
    paced = AttemptTimes(1, 0.0, None, 100.0, ((10.0, 20.0), (30.0, 100.0), (20.0, 60.0)))
    clock = attempt_clock(paced, first_step=0.0, last_step=100.0, now=500.0)
    assert clock is not None and clock.steps.tolist() == [0.0, 20.0, 60.0, 100.0]
    assert clock.times_at(np.array([80.0])).tolist() == [25.0]


def test_the_axis_is_in_the_shareable_url_and_the_curves_answer(
    client: Client, member: User, resumed: Job, django_assert_num_queries: object
) -> None:
    client.force_login(member)
    page = client.get(
        reverse("project-compare", args=["vision"]), {"runs": str(resumed.pk), "axis": "elapsed"}
    )
    html = page.content.decode()
    assert '<option value="elapsed" selected>' in html and 'id="compare-clock"' in html
    url = reverse("project-compare-curves", args=["vision"])
    query = {"runs": str(resumed.pk), "metric": "loss", "axis": "elapsed", "width": "900"}
    # session, user, project, the runs, chunk bounds with the attempts' blocks (the points
    # are all in blocks: no chunk blobs to read), attempts' times, the runs' series names
    # (what a run left out logs instead)
    with django_assert_num_queries(7):  # type: ignore[operator]
        body = json.loads(client.get(url, query).content)
    assert body["axis"] == "elapsed"
    (run,) = body["runs"]
    assert dict(zip(run["y"], run["x"], strict=True))[75.0] == pytest.approx(60.0)
    # An unknown axis is the step axis, which reads no attempt times: one query fewer.
    with django_assert_num_queries(6):  # type: ignore[operator]
        body = json.loads(client.get(url, {**query, "axis": "bogus"}).content)
    (run,) = body["runs"]
    assert body["axis"] == "step" and dict(zip(run["y"], run["x"], strict=True))[75.0] == 75.0


def test_outsiders_get_neither_the_page_nor_the_curves(
    client: Client, outsider: User, resumed: Job
) -> None:
    client.force_login(outsider)
    query = {"runs": str(resumed.pk), "axis": "wall"}
    assert client.get(reverse("project-compare", args=["vision"]), query).status_code == 404
    curves = client.get(reverse("project-compare-curves", args=["vision"]), query)
    assert curves.status_code == 404
