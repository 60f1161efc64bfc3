"""Straggler findings: sustained gaps against the job's median, not one slow sample."""

import math
from collections.abc import Callable

from jobs.enums import State
from jobs.models import Attempt, Job
from monitoring.hangs.stragglers import (
    HOT,
    STEP_RATE,
    UTILIZATION,
    StragglerPolicy,
    _Window,
    attempt_stragglers,
    find_stragglers,
)
from monitoring.series.write import series_append
from tests import factories

POLICY = StragglerPolicy(window_seconds=60, window_steps=20, min_points=5)


def _w(node: str, values: list[float], gpu: int | None = None, span: float = 60) -> _Window:
    return _Window(node=node, gpu=gpu, values=values, span=span)


def _running(project, member, *, gpus_per_node: int = 1) -> tuple[Job, Attempt]:
    """A running two-node job's attempt."""
    job, attempt = factories.job(
        project, member, factories.cluster(), nodes=2, gpus_per_node=gpus_per_node
    )
    attempt.state = State.RUNNING
    attempt.save()
    return job, attempt


def _paces(attempt: Attempt, n2: Callable[[int], float]) -> list[tuple[int, str, float, float]]:
    """Steps 1 to 40 of each node's pace as the example trainer logs it: n1 at 12 steps/s."""
    return [
        (attempt.pk, f"steps_per_sec/{node}", float(step), 12.0 if node == "n1" else n2(step))
        for step in range(1, 41)
        for node in ("n1", "n2")
    ]


def test_a_node_far_below_the_median_pace_is_flagged() -> None:
    found = find_stragglers(
        utilization=[],
        pace=[
            _w("n1", [10.0] * 20, span=19),
            _w("n2", [9.5] * 20, span=19),
            _w("n3", [2.0] * 20, span=19),
        ],
        temperature=[],
        policy=POLICY,
    )
    assert [(f.kind, f.node) for f in found] == [(STEP_RATE, "n3")]
    assert found[0].value == 2.0 and found[0].reference == 9.75  # the others' median
    assert "n3" in found[0].message


def test_one_slow_sample_or_a_mild_gap_is_not_a_straggler() -> None:
    blip = [10.0] * 15 + [1.0] * 5  # a checkpoint save: 5 slow steps of 20
    mild = [6.0] * 20  # 60 % of the median: slower, not far below
    found = find_stragglers(
        utilization=[],
        pace=[_w("n1", [10.0] * 20, span=19), _w("n2", blip, span=19), _w("n3", mild, span=19)],
        temperature=[],
        policy=POLICY,
    )
    assert found == []


def test_two_nodes_compare_with_each_other_not_their_average() -> None:
    # 2.5x slower than its only peer: far below it, though not below half their average.
    found = find_stragglers(
        utilization=[],
        pace=[_w("n1", [5.0] * 20, span=19), _w("n2", [2.0] * 20, span=19)],
        temperature=[],
        policy=POLICY,
    )
    assert [(f.kind, f.node, f.reference) for f in found] == [(STEP_RATE, "n2", 5.0)]


def test_a_window_too_short_to_be_sustained_flags_nothing() -> None:
    short = [_w("n1", [90.0] * 10, gpu=0, span=20), _w("n2", [5.0] * 10, gpu=0, span=20)]
    assert find_stragglers(utilization=short, pace=[], temperature=[], policy=POLICY) == []


def test_a_gpu_far_below_the_median_utilisation_names_node_and_gpu() -> None:
    windows = [
        _w("n1", [95.0] * 30, gpu=0),
        _w("n1", [93.0] * 30, gpu=1),
        _w("n2", [94.0] * 30, gpu=0),
        _w("n2", [12.0] * 28 + [90.0] * 2, gpu=1),
    ]
    found = find_stragglers(utilization=windows, pace=[], temperature=[], policy=POLICY)
    assert [(f.kind, f.node, f.gpu) for f in found] == [(UTILIZATION, "n2", 1)]
    assert "GPU 1 on node n2" in found[0].message


def test_a_hot_gpu_is_flagged_only_when_it_stays_hot() -> None:
    found = find_stragglers(
        utilization=[],
        pace=[],
        temperature=[
            _w("n1", [88.0] * 30, gpu=0),
            _w("n1", [60.0] * 25 + [89.0] * 5, gpu=1),
        ],
        policy=POLICY,
    )
    assert [(f.kind, f.node, f.gpu) for f in found] == [(HOT, "n1", 0)]


def test_attempt_stragglers_reads_the_stored_series(project, member) -> None:
    _job, attempt = _running(project, member, gpus_per_node=2)
    start = 1_796_000_000.0
    points = []
    for second in range(70):
        t = start + second
        for node, gpu in (("n1", 0), ("n1", 1), ("n2", 0), ("n2", 1)):
            util = 20.0 if (node, gpu) == ("n2", 1) else 80.0 + 10 * math.sin(second)
            points.append((attempt.pk, f"gpu/{node}/{gpu}/utilization", t, util))
            points.append((attempt.pk, f"gpu/{node}/{gpu}/temperature", t, 60.0))
    points += _paces(attempt, lambda step: 3.0 if step > 10 else 12.0)
    series_append(points=points)

    found = attempt_stragglers(attempt=attempt, policy=POLICY)
    assert sorted((f.kind, f.node, f.gpu) for f in found) == [
        (UTILIZATION, "n2", 1),
        (STEP_RATE, "n2", None),
    ]
    # A finished attempt has no stragglers to act on.
    attempt.state = State.COMPLETED
    assert attempt_stragglers(attempt=attempt, policy=POLICY) == []


def test_only_what_the_pace_rule_reads_as_a_nodes_pace_sets_the_window(project, member) -> None:
    """A name nested under `steps_per_sec/` is not a node's pace (monitoring.reading.kinds,
    the job page's pace chart): logged further on, it must not move the window off the
    nodes' own pace, nor be read as a node."""
    _job, attempt = _running(project, member)
    points = _paces(attempt, lambda step: 3.0 if step > 10 else 12.0)
    points.append((attempt.pk, "steps_per_sec/n1/ema", 500.0, 0.5))
    series_append(points=points)

    found = attempt_stragglers(attempt=attempt, policy=POLICY)
    assert [(f.kind, f.node, f.value, f.reference) for f in found] == [(STEP_RATE, "n2", 3.0, 12.0)]


def test_the_job_page_names_the_straggler_and_offers_staff_a_drain(
    project, member, staff, client
) -> None:
    job, attempt = _running(project, member)
    series_append(points=_paces(attempt, lambda step: 2.0))

    client.force_login(member)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'data-node="n2"' in page and "Node n2 keeps 2.00 steps/s" in page
    assert 'data-node="n1"' not in page
    assert "/drain/" not in page  # members see the finding, not the button

    client.force_login(staff)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'action="/clusters/{job.cluster.name}/nodes/n2/drain/"' in page
    assert 'name="csrfmiddlewaretoken"' in page
    assert f'name="next" value="/jobs/{job.pk}/"' in page
