"""The hang rule over per-rank progress (pure): hung, paused, slow but regular, startup stall."""

from monitoring.hangs.rules import (
    HANG,
    STARTUP,
    HangPolicy,
    RankProgress,
    Verdict,
    culprit,
    hang_verdict,
    pace_add,
    step_interval,
)

POLICY = HangPolicy(multiple=3.0, floor=10.0, startup=60.0, max_pause=300.0)
T0 = 1_700_000_000.0  # the attempt started


def _pace(interval: float, steps: int, start: float = T0 + 5) -> list[list[float]]:
    return [[start + i * interval, float(i + 1)] for i in range(steps)]


def _verdict(ranks: list[RankProgress], now: float, pace: list[list[float]]) -> Verdict:
    return hang_verdict(ranks=ranks, now=now, started_at=T0, pace=pace, policy=POLICY)


def test_a_stopped_rank_is_named_while_the_others_wait_for_it() -> None:
    # DDP: every rank finished step 40 together; rank 1 was then stopped (SIGSTOP): its
    # heartbeat thread stopped too, while rank 0's kept ticking inside the all-reduce.
    last = T0 + 45.0
    ranks = [
        RankProgress(0, "n1", step=40, step_at=last, alive_at=last + 30),
        RankProgress(1, "n2", step=40, step_at=last + 0.01, alive_at=last + 0.5),
    ]
    pace = _pace(1.0, 40)
    assert not _verdict(ranks, last + 9.0, pace).kind  # under the floor: not yet
    verdict = _verdict(ranks, last + 31.0, pace)
    assert verdict.kind == HANG
    assert verdict.threshold == 10.0  # 3 x 1 s is under the floor
    assert verdict.culprit is not None
    assert (verdict.culprit.rank, verdict.culprit.node) == (1, "n2")
    assert verdict.last_step == 40
    assert "rank 1 on node n2 stopped first (at step 40)" in verdict.why.lower()


def test_without_a_stopped_heartbeat_the_lowest_step_is_blamed() -> None:
    now = T0 + 500
    ranks = [
        RankProgress(0, "n1", step=12, step_at=T0 + 100, alive_at=now),
        RankProgress(2, "n2", step=11, step_at=T0 + 99, alive_at=now),
        RankProgress(1, "n1", step=12, step_at=T0 + 100, alive_at=now),
    ]
    found = culprit(ranks, now)
    assert found is not None and found.rank == 2


def test_slow_but_regular_steps_are_not_a_hang() -> None:
    # 30 s a step, above the floor: the job's own pace sets the limit (3 x 30 s).
    pace = _pace(30.0, 6)
    last = pace[-1][0]
    ranks = [RankProgress(0, "n1", step=6, step_at=last, alive_at=last + 29)]
    assert not _verdict(ranks, last + 29.5, pace).kind
    verdict = _verdict(ranks, last + 89.0, pace)
    assert not verdict.kind and verdict.threshold == 90.0
    assert _verdict(ranks, last + 91.0, pace).kind == HANG


def test_the_first_slow_step_is_measured_from_the_start() -> None:
    # One step seen: the 25 s it took from the start stands for the interval (3 x 25 s).
    pace = [[T0 + 25.0, 1.0]]
    ranks = [RankProgress(0, "n1", step=1, step_at=T0 + 25.0, alive_at=T0 + 50)]
    assert not _verdict(ranks, T0 + 50.0, pace).kind


def test_a_declared_pause_is_not_a_hang_until_it_outlasts_the_pause_limit() -> None:
    pace = _pace(1.0, 20)
    last = pace[-1][0]
    ranks = [
        RankProgress(
            0,
            "n1",
            step=20,
            step_at=last,
            alive_at=last + 90,
            pause="checkpoint",
            pause_since=last + 0.1,
        ),
        RankProgress(1, "n2", step=20, step_at=last, alive_at=last + 90),
    ]
    assert not _verdict(ranks, last + 90.0, pace).kind
    assert _verdict(ranks, last + 301.0, pace).kind == HANG  # max_pause: 300 s


def test_a_rank_stopped_inside_a_checkpoint_is_still_a_hang() -> None:
    # Rank 1 stopped inside the checkpoint; rank 0 waits for it inside its own.
    pace = _pace(1.0, 20)
    last = pace[-1][0]
    ranks = [
        RankProgress(
            0,
            "n1",
            step=20,
            step_at=last,
            alive_at=last + 60,
            pause="checkpoint",
            pause_since=last + 0.1,
        ),
        RankProgress(
            1,
            "n2",
            step=20,
            step_at=last,
            alive_at=last + 0.2,
            pause="checkpoint",
            pause_since=last + 0.1,
        ),
    ]
    verdict = _verdict(ranks, last + 60.0, pace)
    assert verdict.kind == HANG and verdict.culprit is not None and verdict.culprit.rank == 1


def test_the_end_of_a_pause_counts_as_progress() -> None:
    pace = _pace(1.0, 20)
    last = pace[-1][0]
    ranks = [
        RankProgress(0, "n1", step=20, step_at=last, alive_at=last + 95, resumed_at=last + 92.0)
    ]
    assert not _verdict(ranks, last + 95.0, pace).kind  # 3 s since the checkpoint ended


def test_no_first_step_within_the_window_is_a_startup_stall() -> None:
    waiting = [RankProgress(0, "n1", alive_at=T0 + 59), RankProgress(1, "n2", alive_at=T0 + 59)]
    assert not _verdict(waiting, T0 + 59.0, []).kind
    verdict = _verdict(waiting, T0 + 61.0, [])
    assert verdict.kind == STARTUP and "rendezvous or data loading" in verdict.why
    assert _verdict([], T0 + 61.0, []).kind == STARTUP  # not even a heartbeat


def test_the_interval_is_the_median_so_one_long_checkpoint_does_not_stretch_it() -> None:
    pace = _pace(1.0, 10)
    pace.append([pace[-1][0] + 120.0, 11.0])  # one step that waited for a checkpoint
    assert step_interval(pace) == 1.0
    assert step_interval([[0.0, 0.0], [10.0, 5.0]]) == 2.0
    assert step_interval([[5.0, 3.0]]) is None


def test_pace_keeps_the_furthest_rank_and_only_moves_forward() -> None:
    ranks = [RankProgress(0, step=5, step_at=10.0), RankProgress(1, step=6, step_at=11.0)]
    pace = pace_add([], ranks)
    assert pace == [[11.0, 6.0]]
    assert pace_add(pace, ranks) == pace  # no new step: no new sample
    assert (
        len(
            pace_add(
                [[float(i), float(i)] for i in range(16)], [RankProgress(0, step=99, step_at=99.0)]
            )
        )
        == 16
    )


def test_a_job_spec_overrides_the_portal_policy() -> None:
    base = {"multiple": 10.0, "floor": 300.0, "startup": 1800.0, "stack_wait": 15.0}
    policy = HangPolicy.from_settings(base, multiple=None, floor=20, startup=None)
    assert (policy.multiple, policy.floor, policy.startup) == (10.0, 20.0, 1800.0)
    assert policy.stack_wait == 15.0


def test_a_step_the_output_gave_joins_the_pace_at_the_poll_that_read_it() -> None:
    ranks = [RankProgress(0, step=5, step_at=10.0)]
    # Higher than any rank's: the output's step, timed by the poll.
    assert pace_add([], ranks, output_step=7, now=12.0) == [[12.0, 7.0]]
    # Not higher: the rank's own time stands (the poll read it later than it happened).
    assert pace_add([], ranks, output_step=5, now=12.0) == [[10.0, 5.0]]
    assert pace_add([[12.0, 7.0]], [], output_step=7, now=20.0) == [[12.0, 7.0]]


def test_output_steps_alone_make_a_hang_and_never_a_startup_stall() -> None:
    # No rank reports (no helper, no rank labels): the output's steps, one every 2 s.
    pace = _pace(2.0, 30, start=T0 + 3000)
    last = pace[-1][0]
    late = T0 + 7200  # far past the 60 s startup window
    assert not _verdict([], last + 5.0, pace).kind
    assert not _verdict([], late, [[late - 1.0, 160.0]]).kind
    verdict = _verdict([], last + 11.0, pace)
    assert (verdict.kind, verdict.threshold, verdict.last_step) == (HANG, 10.0, 30)
    assert verdict.culprit is None
    assert (
        verdict.why
        == "No step in its output for 11 s (this job's limit: 10 s); the last step was 30."
    )
    records = hang_verdict(
        ranks=[], now=last + 11.0, started_at=T0, pace=pace, policy=POLICY, records=True
    )
    assert records.why.endswith("it printed 31 records, no steps.")


def test_the_output_counts_as_progress_beside_the_ranks() -> None:
    # Ranks known by their labelled lines up to step 40; the output went on to step 44.
    ranks = [RankProgress(0, step=40, step_at=T0 + 100), RankProgress(1, step=40, step_at=T0 + 100)]
    pace = [*_pace(1.0, 40, start=T0 + 61), [T0 + 104, 44.0]]
    assert not _verdict(ranks, T0 + 112.0, pace).kind  # 8 s since the output's step 44
    verdict = _verdict(ranks, T0 + 115.0, pace)
    assert verdict.kind == HANG and verdict.last_step == 44
