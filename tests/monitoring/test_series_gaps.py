"""A NaN or infinite value is a gap on its own series: stored at its step, left out of
every minimum, last and best, and carried to the page as y null with its x in `nonfinite`.

The stdout lines are what a training loop prints when its loss diverges (the issue's
`step 12 loss nan lr 0.03`; Python prints float('inf') as `inf`).
"""

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.test import Client

from clusters.models import Cluster
from jobs.models import Attempt
from jobs.poll import open_pages
from jobs.poll.open_pages import page_open
from jobs.rundir import STDOUT_FILE, job_group
from monitoring.ingest.worker import _cap_runs, write_frame
from monitoring.models import RunSummary, SeriesChunk
from monitoring.reading.parsers import MetricPoint
from monitoring.series.downsample import downsample, summary
from monitoring.series.overwrite import series_overwrite
from monitoring.series.read import series_names, series_read
from monitoring.series.write import series_append
from portal_lib.fast_json import loads
from projects.models import Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

DIVERGING = (
    b"step 11 loss 2.5 lr 0.03\n"
    b"step 12 loss nan lr 0.03\n"
    b"step 13 loss inf lr 0.03\n"
    b"step 14 loss 2.4 lr 0.03\n"
)


@pytest.fixture
def no_open_pages() -> Iterator[None]:
    open_pages._redis().delete(open_pages._KEY)
    yield
    open_pages._redis().delete(open_pages._KEY)


def _listen(job_id: int) -> str:
    layer = get_channel_layer()

    async def listen() -> str:
        channel = await layer.new_channel()
        await layer.group_add(job_group(job_id), channel)
        return channel

    return async_to_sync(listen)()


def _receive(channel: str) -> dict[str, Any]:
    return async_to_sync(get_channel_layer().receive)(channel)


def test_a_nan_line_is_a_gap_at_its_step_in_the_store_page_and_delta(
    project: Project,
    owner: User,
    cluster: Cluster,
    client: Client,
    django_capture_on_commit_callbacks: Any,
    no_open_pages: None,
) -> None:
    attempt = running(factories.job(project, owner, cluster)[1])
    channel = _listen(attempt.job_id)
    page_open(job_id=attempt.job_id, channel=channel)
    with django_capture_on_commit_callbacks(execute=True):
        ingest([attempt], reply_with({attempt: {STDOUT_FILE: DIVERGING}}))

    assert series_names(attempt_id=attempt.pk) == ["loss", "lr"]  # no `loss_nan_lr`
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert (loss.xs, loss.ys, loss.nonfinite) == ([11.0, 14.0], [2.5, 2.4], [12.0, 13.0])
    assert series_read(attempt_id=attempt.pk, name="lr").xs == [11.0, 12.0, 13.0, 14.0]

    client.force_login(owner)
    response = client.get(f"/api/v1/jobs/{attempt.job_id}/attempts/1/series/loss")
    json.loads(response.content, parse_constant=pytest.fail)  # strict JSON: no bare NaN
    body = response.json()
    assert (body["x"], body["y"]) == ([11.0, 12.0, 13.0, 14.0], [2.5, None, None, 2.4])
    assert (body["nonfinite"], body["total"]) == ([12.0, 13.0], 4)

    delta = _receive(channel)
    assert delta["series"]["loss"] == [[11.0, 2.5], [12.0, None], [13.0, None], [14.0, 2.4]]
    assert delta["nonfinite"] == {"loss": [12.0, 13.0]}
    json.dumps(delta, allow_nan=False)

    # The runs table's summary: the last and the best are finite values.
    summary_row = RunSummary.objects.get(job_id=attempt.job_id)
    assert summary_row.metrics["loss"] == [2.4, 2.4, 2.5, 14.0]  # last, min, max, last x
    assert (summary_row.loss_last, summary_row.loss_best) == (2.4, 2.4)


def test_the_parser_frame_carries_non_finite_values_as_text_the_poll_reads_back() -> None:
    points = [MetricPoint("loss", 12, math.nan), MetricPoint("loss", 13, -math.inf)]
    capped, _ = _cap_runs(points)
    frame = _frame(capped)
    assert [float(value) for _, _, value, _ in frame] == pytest.approx(
        [math.nan, -math.inf], nan_ok=True
    )


def _frame(message: object) -> Any:
    class Sink:
        data = b""

        def write(self, chunk: bytes) -> None:
            self.data += chunk

        def flush(self) -> None:
            pass

    sink = Sink()
    write_frame(sink, message)  # type: ignore[arg-type]
    return loads(sink.data[8:])


@pytest.fixture
def attempt(project: Project, member: User) -> Attempt:
    return factories.job(project, member, factories.cluster())[1]


def test_a_gap_survives_summaries_and_never_sets_a_bound(attempt: Attempt) -> None:
    n = 200_000
    rng = np.random.default_rng(3)
    ys = rng.normal(size=n)
    ys[123_457] = math.nan  # inside a chunk that a wide read takes as its summary
    series_append(points=[(attempt.pk, "loss", float(x), y) for x, y in enumerate(ys.tolist())])
    read = series_read(attempt_id=attempt.pk, name="loss", max_points=2000)
    assert read.downsampled and read.total == n
    assert read.nonfinite == [123_457.0]
    assert len(read.xs) + len(read.nonfinite) <= 2000
    assert max(read.ys) == np.nanmax(ys) and min(read.ys) == np.nanmin(ys)
    for chunk in SeriesChunk.objects.filter(series__attempt=attempt):
        assert math.isfinite(chunk.y_min) and math.isfinite(chunk.y_max)


def test_a_later_value_for_the_step_replaces_its_gap(attempt: Attempt) -> None:
    series_append(points=[(attempt.pk, "loss", 1.0, 3.0), (attempt.pk, "loss", 2.0, math.nan)])
    series_overwrite(repeats=[(attempt.pk, "loss", 2.0)])
    series_append(points=[(attempt.pk, "loss", 2.0, 2.0)])
    read = series_read(attempt_id=attempt.pk, name="loss")
    assert (read.xs, read.ys, read.nonfinite) == ([1.0, 2.0], [3.0, 2.0], [])


def test_downsampling_keeps_each_buckets_extremes_and_first_gap() -> None:
    xs = np.arange(10_000, dtype=float)
    ys = np.sin(xs / 50.0)
    ys[::7] = math.nan  # a series that is mostly NaN costs its buckets, not its points
    out_x, out_y = downsample(xs, ys, 302)  # 100 buckets of 100 points
    assert len(out_x) <= 302
    gaps = out_x[np.isnan(out_y)]
    assert len(gaps) == 100 and np.all(np.diff(gaps) >= 7)
    finite = out_y[~np.isnan(out_y)]
    assert finite.max() == np.nanmax(ys) and finite.min() == np.nanmin(ys)
    sx, sy = summary(xs[:4096], ys[:4096])
    assert len(sx) <= 3 * 64 and np.isnan(sy).sum() == 64
