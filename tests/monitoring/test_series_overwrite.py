"""One value per step in a stored series, the newest, in the database and in the page's deltas.

A step can come twice: a step's lines in two polls where the later line gives a name
again (four corpus samples, cut at some byte), a tqdm bar's redraw read while it ran and
then its final state, a trainer restarted from a checkpoint inside the same job. Before,
the series kept both values. The poll's real ingest runs here (the parser process, the
PostgreSQL store); `monitoring.reading.overwrite` is the rule, `monitoring.series.overwrite` the
delete.
"""

from typing import Any

import numpy as np
import pytest

from jobs.models import Attempt
from monitoring.ingest import watch as ingest_module
from monitoring.models import SeriesChunk
from monitoring.models.series import CHUNK_SIZE
from monitoring.reading.overwrite import newest_per_step
from monitoring.reading.throughput import rate_form
from monitoring.series.overwrite import series_overwrite
from monitoring.series.read import series_read
from monitoring.series.write import series_append
from tests import factories
from tests.corpus.loader import load_metric_cases
from tests.corpus.runner import ingest_polls
from tests.security.ingest_helpers import ingest, reply_with, running

pytestmark = pytest.mark.django_db

CASES = {case.name: case for case in load_metric_cases()}
# The samples where a cut into two polls gives a step twice (tests/monitoring/test_reader_split_polls).
TWICE = [
    "flair_legacy_epoch_done",
    "lightning_bar_redraws_as_lines",
    "torchtitan_pasted_every_rank",
    "ultralytics_epoch_table",
]


@pytest.fixture
def pushed(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The deltas the poll pushes to open job pages, in order."""
    deltas: list[dict[str, Any]] = []
    # Every job's, as when Redis cannot say which pages are open (no page is, here).
    monkeypatch.setattr(ingest_module, "push_built", lambda build: deltas.extend(build(None)))
    return deltas


@pytest.fixture
def attempt(project, owner) -> Attempt:
    return running(factories.job(project, owner, factories.cluster())[1])


def _poll(attempt: Attempt, data: bytes, capture) -> None:
    with capture(execute=True):
        ingest([attempt], reply_with({attempt: {"stdout.log": data}}))


def _stored(attempt: Attempt, name: str) -> dict[float, float]:
    read = series_read(attempt_id=attempt.pk, name=name, max_points=10**6)
    assert len(set(read.xs)) == len(read.xs), f"{name}: a step stored twice: {read.xs}"
    return dict(zip(read.xs, read.ys, strict=True))


def _page(deltas: list[dict[str, Any]], name: str) -> dict[float, float]:
    """What job-charts.js holds: a Map from x to y per series, each delta's points set in order."""
    shown: dict[float, float] = {}
    for delta in deltas:
        for x, y in delta.get("series", {}).get(name, []):
            shown[x] = y
    return shown


def _first_cut_giving_a_step_twice(data: bytes) -> int:
    for cut in range(1, len(data)):
        given = ingest_polls([data[:cut], data[cut:]])
        if len({p[:3] for p in given}) < len(given):
            return cut
    raise AssertionError("no cut gives a step twice")


@pytest.mark.parametrize("name", TWICE)
def test_a_step_a_later_poll_gives_again_keeps_only_the_newest_value(
    name: str, attempt: Attempt, pushed, django_capture_on_commit_callbacks
) -> None:
    data = CASES[name].text.encode()
    cut = _first_cut_giving_a_step_twice(data)
    _poll(attempt, data[:cut], django_capture_on_commit_callbacks)
    _poll(attempt, data[cut:], django_capture_on_commit_callbacks)
    Attempt.objects.filter(pk=attempt.pk).update(state="COMPLETED")
    expected: dict[str, dict[float, float]] = {}
    for _, printed, step, value in newest_per_step(ingest_polls([data])):
        stored = rate_form(printed, value)  # tqdm's s/it is kept as the rate it stands for
        if stored is not None:
            expected.setdefault(stored[0], {})[step] = stored[1]
    for series, points in expected.items():
        assert _stored(attempt, series) == points, series
        assert _page(pushed, series) == points, series


def test_a_bar_redraw_then_its_final_state_keeps_the_final_value(
    attempt: Attempt, pushed, django_capture_on_commit_callbacks
) -> None:
    """tqdm's close() draws the last step again, with the rate over the whole bar."""
    bar = b"\rtrain: 100%|##########| 90/90 [00:36<00:00, RATE, loss=1.01]"
    _poll(attempt, bar.replace(b"RATE", b"2.49it/s") + b"\r", django_capture_on_commit_callbacks)
    assert _stored(attempt, "it_per_s") == {90.0: 2.49}  # read while the bar ran
    _poll(attempt, bar.replace(b"RATE", b"2.50it/s") + b"\n", django_capture_on_commit_callbacks)
    assert _stored(attempt, "it_per_s") == {90.0: 2.50}
    assert _page(pushed, "it_per_s") == {90.0: 2.50}
    assert _stored(attempt, "loss") == {90.0: 1.01}


def test_a_trainer_restarted_in_the_same_job_overwrites_the_steps_it_prints_again(
    attempt: Attempt, pushed, django_capture_on_commit_callbacks
) -> None:
    """torchrun's --max-restarts: the same attempt prints steps 4-6 again from a checkpoint."""
    first = b"".join(b"iter %d: loss %.4f\n" % (i, 10 - i) for i in range(1, 8))
    again = b"".join(b"iter %d: loss %.4f\n" % (i, 5 - i / 10) for i in range(4, 7))
    _poll(attempt, first, django_capture_on_commit_callbacks)
    _poll(attempt, again, django_capture_on_commit_callbacks)
    want = {1.0: 9.0, 2.0: 8.0, 3.0: 7.0, 4.0: 4.6, 5.0: 4.5, 6.0: 4.4, 7.0: 3.0}
    assert _stored(attempt, "loss") == want
    assert _page(pushed, "loss") == want
    # Steps above the highest printed so far are new: nothing to look up (the common case).
    _poll(attempt, b"iter 8: loss 2.0000\n", django_capture_on_commit_callbacks)
    assert _stored(attempt, "loss") == {**want, 8.0: 2.0}


def test_overwrite_rewrites_compacted_and_full_chunks(attempt: Attempt) -> None:
    xs = np.arange(CHUNK_SIZE + 300, dtype=np.float64)
    series_append(points=[(attempt.pk, "loss", x, 1.0) for x in xs.tolist()])
    for start in range(CHUNK_SIZE + 300, CHUNK_SIZE + 340, 2):  # enough appends to compact
        series_append(
            points=[
                (attempt.pk, "loss", float(start), 1.0),
                (attempt.pk, "loss", float(start + 1), 1.0),
            ]
        )
    replaced = [5.0, float(CHUNK_SIZE + 10), float(CHUNK_SIZE + 320)]
    assert series_overwrite(repeats=[(attempt.pk, "loss", x) for x in replaced]) == 3
    series_append(points=[(attempt.pk, "loss", x, 2.0) for x in replaced])
    stored = _stored(attempt, "loss")
    assert len(stored) == CHUNK_SIZE + 340
    assert {x for x, y in stored.items() if y == 2.0} == set(replaced)
    for chunk in SeriesChunk.objects.filter(series__attempt=attempt):
        assert 0 < chunk.count <= CHUNK_SIZE
    # A step never stored, or a series never written: nothing to delete, nothing breaks.
    assert series_overwrite(repeats=[(attempt.pk, "loss", -1.0), (attempt.pk, "lr", 3.0)]) == 0
