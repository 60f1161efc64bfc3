"""A job's summary folded poll by poll is the summary of all its points at once, whatever the
polls, attempts and names: the fold reads the stored stats as values and writes them back."""

import math
import random

from django.contrib.auth.models import User

from clusters.models import Cluster
from jobs.models import Attempt
from monitoring.models import RunSummary
from monitoring.reading.throughput import COMPUTED_MFU, PRINTED_MFU
from monitoring.runs.summary import runs_record
from monitoring.series.points import MAX_SERIES_PER_ATTEMPT, Point
from projects.models import Project
from tests import factories

NAMES = ("loss", "train_loss", "eval_loss", "val/acc", "tokens_per_sec", COMPUTED_MFU, "lr")


def _reference(points: list[Point]) -> dict[str, list[float]]:
    """[last y, min y, max y, last x] of each name, from every point in arrival order."""
    stats: dict[str, list[float]] = {}
    for name in {p[1] for p in points}:
        mine = [p for p in points if p[1] == name]
        ys = [p[3] for p in mine]
        stats[name] = [mine[-1][3], min(ys), max(ys), mine[-1][2]]
    return stats


def test_poll_by_poll_is_all_points_at_once(
    project: Project, owner: User, cluster: Cluster
) -> None:
    rng = random.Random(7)
    job, first = factories.job(project, owner, cluster)
    second = Attempt.objects.create(job=job, number=2)
    attempts = {a.pk: Attempt.objects.select_related("job").get(pk=a.pk) for a in (first, second)}
    points: list[Point] = []
    for poll in range(6):
        attempt_id = first.pk if poll < 3 else second.pk
        batch = [
            (attempt_id, name, float(poll * 10 + step), rng.uniform(-5, 5))
            for step in range(rng.randint(1, 4))
            for name in rng.sample(NAMES, rng.randint(1, len(NAMES)))
        ]
        points += batch
        runs_record(attempts=attempts, points=batch, params={})

    summary = RunSummary.objects.get(job=job)
    stats = _reference(points)
    assert summary.metrics == stats
    assert (summary.loss_last, summary.loss_best) == tuple(stats["loss"][:2])
    assert (summary.eval_name, summary.eval_best) == ("eval_loss", stats["eval_loss"][1])
    assert (summary.throughput, summary.throughput_unit) == (stats["tokens_per_sec"][0], "tokens")
    assert summary.mfu == stats[COMPUTED_MFU][0]


def test_a_non_finite_point_is_left_out_and_the_rest_lands(
    project: Project, owner: User, cluster: Cluster
) -> None:
    job, attempt = factories.job(project, owner, cluster)
    attempts = {attempt.pk: Attempt.objects.select_related("job").get(pk=attempt.pk)}
    points = [
        (attempt.pk, "loss", 1.0, 2.0),
        (attempt.pk, "loss", 2.0, math.nan),
        (attempt.pk, "loss", 3.0, math.inf),
        (attempt.pk, PRINTED_MFU, 3.0, 0.4),
    ]
    runs_record(attempts=attempts, points=points, params={})

    summary = RunSummary.objects.get(job=job)
    assert summary.metrics == {"loss": [2.0, 2.0, 2.0, 1.0], PRINTED_MFU: [0.4, 0.4, 0.4, 3.0]}
    assert (summary.loss_last, summary.mfu) == (2.0, 0.4)


def test_new_names_stop_at_the_cap_across_polls(
    project: Project, owner: User, cluster: Cluster
) -> None:
    job, attempt = factories.job(project, owner, cluster)
    attempts = {attempt.pk: Attempt.objects.select_related("job").get(pk=attempt.pk)}
    names = [f"m{i:03}" for i in range(MAX_SERIES_PER_ATTEMPT + 20)]
    runs_record(
        attempts=attempts, points=[(attempt.pk, n, 1.0, 1.0) for n in names[:150]], params={}
    )
    runs_record(attempts=attempts, points=[(attempt.pk, n, 2.0, 0.5) for n in names], params={})

    metrics = RunSummary.objects.get(job=job).metrics
    assert sorted(metrics) == names[:MAX_SERIES_PER_ATTEMPT]
    assert metrics["m000"] == [0.5, 0.5, 1.0, 2.0]
