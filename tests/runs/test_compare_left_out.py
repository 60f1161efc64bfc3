"""Compare says what it leaves out and why, offers the series the runs log, titles its y axis
with the series' unit, keeps each bucket's extremes and the last point, and reads any number
of runs in the same few queries."""

import json
from datetime import timedelta

import numpy as np
import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from jobs.models import Attempt, Job
from monitoring.runs.compare import curves_read
from monitoring.runs.compare.series import Offered, default_series
from monitoring.runs.compare.units import y_title
from monitoring.runs.summary import runs_record
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories

CURVES = "project-compare-curves"


def _logging(project: Project, user: User, cluster: Cluster, name: str, series: dict) -> Job:
    """A run whose attempt logged `series` ({name: [y at step 1, 2, ...]}), summary kept."""
    job, attempt = factories.job(project, user, cluster, name=name)
    points = [
        (attempt.pk, metric, float(step), float(y))
        for metric, ys in series.items()
        for step, y in enumerate(ys, 1)
    ]
    if points:
        series_append(points=points)
        runs_record(attempts={attempt.pk: attempt}, points=points, params={})
    return job


@pytest.fixture
def four(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    """Two runs logging `loss`, one `train_loss` and `eval_loss`, one with no points yet."""
    return [
        _logging(project, owner, cluster, "a", {"loss": [3.0, 2.0, 1.0]}),
        _logging(project, owner, cluster, "b", {"loss": [3.5, 2.5, 1.5]}),
        _logging(project, owner, cluster, "hf", {"train_loss": [4.0, 3.0], "eval_loss": [3.3]}),
        _logging(project, owner, cluster, "queued", {}),
    ]


def _curves(client: Client, runs: list[int], **extra: str) -> dict:
    response = client.get(
        reverse(CURVES, args=["vision"]), {"runs": ",".join(map(str, runs)), **extra}
    )
    assert response.status_code == 200
    return json.loads(response.content)


def test_each_run_left_out_is_named_with_why(
    client: Client, member: User, four: list[Job], other_job: Job
) -> None:
    client.force_login(member)
    body = _curves(client, [job.pk for job in four] + [other_job.pk], metric="loss")
    assert [run["name"] for run in body["runs"]] == ["a", "b"]
    why = {run["id"]: run for run in body["left_out"]}
    assert set(why) == {four[2].pk, four[3].pk, other_job.pk}
    assert why[four[2].pk]["why"] == "no_series"
    assert why[four[2].pk]["text"] == (
        f"hf #{four[2].pk} has no “loss” series (it logs eval_loss, train_loss)."
    )
    assert why[four[3].pk]["why"] == "no_points"
    assert "no points yet" in why[four[3].pk]["text"]
    # Another project's run reads like one that does not exist: nothing of it is shown.
    assert why[other_job.pk] == {
        "id": other_job.pk,
        "name": "",
        "why": "not_visible",
        "text": f"#{other_job.pk}: no run of this project that you may see.",
    }
    assert other_job.name not in json.dumps(body)


def test_the_other_series_can_be_chosen_and_the_rest_are_said_left_out(
    client: Client, member: User, four: list[Job]
) -> None:
    client.force_login(member)
    ids = [job.pk for job in four]
    body = _curves(client, ids, metric="train_loss")
    assert [run["name"] for run in body["runs"]] == ["hf"]
    texts = [run["text"] for run in body["left_out"]]
    assert f"a #{four[0].pk} has no “train_loss” series (it logs loss)." in texts
    page = client.get(
        reverse("project-compare", args=["vision"]), {"runs": ",".join(map(str, ids))}
    )
    html = page.content.decode()
    # The selector offers every series the runs log, with how many log it; loss by default.
    assert '<option value="loss" selected>loss (2 of 4)</option>' in html
    assert '<option value="train_loss">train_loss (1 of 4)</option>' in html
    assert '<option value="eval_loss">eval_loss (1 of 4)</option>' in html


def test_runs_past_the_limit_are_said_left_out(
    client: Client, member: User, four: list[Job], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("web.runs.views.MAX_RUNS", 1)
    client.force_login(member)
    body = _curves(client, [four[0].pk, four[1].pk], metric="loss")
    assert [run["name"] for run in body["runs"]] == ["a"]
    assert body["left_out"] == [
        {
            "id": four[1].pk,
            "name": "",
            "why": "over_limit",
            "text": f"#{four[1].pk}: compare draws at most 1 runs.",
        }
    ]


def test_a_run_of_only_nan_is_left_out_as_such(
    client: Client, member: User, project: Project, owner: User, cluster: Cluster
) -> None:
    job = _logging(project, owner, cluster, "diverged", {"loss": [float("nan"), float("inf")]})
    client.force_login(member)
    body = _curves(client, [job.pk], metric="loss")
    assert body["runs"] == []
    assert body["left_out"][0]["why"] == "all_gaps"
    assert "every “loss” value is NaN or infinite" in body["left_out"][0]["text"]


def test_the_y_axis_names_the_series_and_its_unit(
    client: Client, member: User, four: list[Job]
) -> None:
    client.force_login(member)
    body = _curves(client, [four[0].pk], metric="tokens_per_sec")
    assert body["y_title"] == "tokens_per_sec (tokens/s)" and body["unit"] == "tokens/s"
    assert y_title("samples_per_sec") == "samples_per_sec (samples/s)"
    assert y_title("it_per_s") == "it_per_s (steps/s)"
    assert y_title("gpu/n1/0/power") == "gpu/n1/0/power (W)"
    assert y_title("mfu_computed") == "mfu_computed (fraction of peak)"
    assert y_title("loss") == "loss"  # no unit: the name alone


def test_the_default_series_is_the_loss_most_runs_log() -> None:
    assert default_series([Offered("loss", 3), Offered("train_loss", 1)]) == "loss"
    assert default_series([Offered("loss", 1), Offered("train_loss", 3)]) == "train_loss"
    assert default_series([Offered("accuracy", 2), Offered("eval_loss", 1)]) == "eval_loss"
    assert default_series([Offered("accuracy", 2), Offered("lr", 1)]) == "accuracy"
    assert default_series([]) == "loss"


def test_downsampling_keeps_each_extreme_and_the_last_point(
    project: Project, owner: User, cluster: Cluster
) -> None:
    job, attempt = factories.job(project, owner, cluster, name="long")
    steps = np.arange(40_000, dtype=np.float64)
    loss = 2.0 / np.sqrt(steps + 1)
    loss[12_345], loss[27_001] = 9.0, -4.0  # one step up, one step down
    loss[-1] = 0.123456  # the last point, exact
    series_append(
        points=[
            (attempt.pk, "loss", x, y) for x, y in zip(steps.tolist(), loss.tolist(), strict=True)
        ]
    )
    (curve,) = curves_read(jobs=[job], metric="loss", width=60)
    assert len(curve.xs) <= 2 * 60 + 2 and curve.total == 40_000
    assert (curve.xs[curve.ys.index(9.0)], curve.xs[curve.ys.index(-4.0)]) == (12_345, 27_001)
    assert (curve.xs[0], curve.ys[0]) == (0, 2.0)
    assert (curve.xs[-1], curve.ys[-1]) == (39_999, 0.123456)


def _queries(client: Client, runs: list[Job], **extra: str) -> int:
    with CaptureQueriesContext(connection) as seen:
        body = _curves(client, [job.pk for job in runs], metric="loss", **extra)
    assert len(body["runs"]) == len(runs)
    return len(seen)


@pytest.mark.parametrize("extra", [{}, {"group": "seed"}, {"axis": "elapsed"}])
def test_the_queries_do_not_grow_with_the_runs(
    client: Client,
    member: User,
    project: Project,
    owner: User,
    cluster: Cluster,
    extra: dict,
    django_assert_max_num_queries,
) -> None:
    runs = [_logging(project, owner, cluster, f"s{i}", {"loss": [2.0, 1.0, 0.5]}) for i in range(8)]
    for i, job in enumerate(runs):
        job.params = {"seed": i % 2}
        job.save()
    began = timezone.now() - timedelta(hours=1)
    Attempt.objects.filter(job__in=runs).update(
        started_at=began, ended_at=began + timedelta(minutes=5)
    )
    client.force_login(member)
    two = _queries(client, runs[:2], **extra)
    eight = _queries(client, runs, **extra)
    assert eight == two
    # The session, its user, the project, the runs, the chunks' bounds with the new blocks,
    # the chunks' blobs (none here: every point is still in a block), the runs' series
    # names; on a time axis the attempts' times too.
    with django_assert_max_num_queries(8):
        _curves(client, [job.pk for job in runs], metric="loss", **extra)


def test_the_scales_come_back_from_the_url(client: Client, member: User, four: list[Job]) -> None:
    client.force_login(member)
    url = reverse("project-compare", args=["vision"])
    runs = f"{four[0].pk},{four[1].pk}"
    plain = client.get(url, {"runs": runs}).content.decode()
    # No smoothing unless asked: a range input without a value would sit at its middle.
    assert 'id="compare-smooth" min="0" max="0.99" step="0.01" value="0">' in plain
    assert 'id="compare-log">' in plain
    shared = client.get(url, {"runs": runs, "log": "1", "smooth": "0.6"}).content.decode()
    assert 'value="0.60">' in shared and 'id="compare-log" checked>' in shared
    for bogus in ("1.5", "-1", "nan", "x"):
        page = client.get(url, {"runs": runs, "smooth": bogus}).content.decode()
        assert 'step="0.01" value="0">' in page
