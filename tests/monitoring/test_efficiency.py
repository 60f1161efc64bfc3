"""The efficiency card's arithmetic and the idle-GPU ladder's rule (pure functions)."""

from datetime import UTC, datetime, timedelta

import pytest

from monitoring.goodput.efficiency import (
    PARTS,
    GpuTrace,
    Span,
    build_card,
    energy_wh,
    find_bottleneck,
    gpu_figures,
    memory_total_for,
    percentile,
    split_gpu_hours,
)
from monitoring.goodput.idle import IdleState, Rule, idle_action, idle_advance


def samples(start: float, values: list[float], every: float = 1.0) -> list[tuple[float, float]]:
    return [(start + i * every, v) for i, v in enumerate(values)]


def test_parts_sum_to_the_charge_and_each_is_what_was_measured():
    # 2 GPUs, 1000 s: startup 100 s, lost from 800 s, 50 idle GPU-seconds.
    span = Span(start=0, end=1000, first_step=100, lost_from=800)
    total = 2 * 1000 / 3600
    parts = split_gpu_hours(total_gpu_hours=total, gpus=2, span=span, idle_gpu_seconds=50)
    assert list(parts) == list(PARTS)
    assert sum(parts.values()) == pytest.approx(total, rel=1e-12)
    assert parts["startup"] * 3600 == pytest.approx(200)
    assert parts["lost"] * 3600 == pytest.approx(400)
    assert parts["idle"] * 3600 == pytest.approx(50)
    assert parts["hung"] == parts["declared_pauses"] == 0
    assert parts["productive"] * 3600 == pytest.approx(2000 - 200 - 400 - 50)


def test_hung_and_declared_pauses_are_inputs_taken_out_of_the_idle_part():
    span = Span(start=0, end=1000, first_step=0)
    parts = split_gpu_hours(
        total_gpu_hours=1000 / 3600,
        gpus=1,
        span=span,
        idle_gpu_seconds=300,
        declared_pause_seconds=120,
        hung_seconds=60,
    )
    assert parts["declared_pauses"] * 3600 == pytest.approx(120)
    assert parts["hung"] * 3600 == pytest.approx(60)
    assert parts["idle"] * 3600 == pytest.approx(300 - 180)  # the pauses and hang were idle
    assert sum(parts.values()) == pytest.approx(1000 / 3600)


def test_a_hung_attempt_that_was_resumed_loses_the_work_up_to_the_hang_and_hangs_after():
    # 2 GPUs, 1000 s: first step at 100 s, the checkpoint resumed from at 700 s, the last
    # step at 760 s, cancelled for the hang at 1000 s. The hung 240 s are not lost work too.
    span = Span(start=0, end=1000, first_step=100, lost_from=700)
    util = samples(0, [90.0] * 760 + [0.0] * 241)  # the hung GPUs read idle
    traces = [GpuTrace("n1", 0, utilization=util), GpuTrace("n2", 0, utilization=util)]
    card = build_card(
        traces=traces,
        span=span,
        gpus=2,
        total_gpu_hours=2000 / 3600,
        threshold_percent=10,
        hung_seconds=240,
    )
    parts = {part: hours * 3600 / 2 for part, hours in card.parts.items()}  # wall seconds
    assert parts["lost"] == pytest.approx(60)
    assert parts["hung"] == pytest.approx(240)
    assert parts["idle"] == pytest.approx(0, abs=1)  # the hang's idle GPUs are its hung part
    assert parts["startup"] == pytest.approx(100)
    assert parts["productive"] == pytest.approx(1000 - 100 - 60 - 240, abs=1)
    assert sum(card.parts.values()) == pytest.approx(2000 / 3600)


def test_a_ledger_shorter_than_the_portal_span_still_gets_parts_that_sum_to_it():
    span = Span(start=0, end=1000, first_step=600, lost_from=900)
    charged = 900 / 3600  # sacct's elapsed a little shorter than the portal saw
    parts = split_gpu_hours(total_gpu_hours=charged, gpus=1, span=span, idle_gpu_seconds=0)
    assert sum(parts.values()) == pytest.approx(charged)
    assert all(v >= 0 for v in parts.values())


def test_an_attempt_without_a_step_is_all_startup_and_without_a_next_attempt_loses_nothing():
    parts = split_gpu_hours(
        total_gpu_hours=1.0, gpus=1, span=Span(start=0, end=3600), idle_gpu_seconds=0
    )
    assert parts["startup"] == pytest.approx(1.0)
    assert parts["lost"] == 0


def test_gpu_figures_mean_p95_peak_energy_and_idle_outside_startup_and_lost():
    util = samples(0, [0.0] * 10 + [90.0] * 80 + [5.0] * 10)  # 100 s, 1 s apart
    trace = GpuTrace(
        "n1",
        0,
        utilization=util,
        memory_mib=samples(0, [1000, 5000, 3000]),
        power_w=samples(0, [300.0] * 3601),
    )
    span = Span(start=0, end=100, first_step=10, lost_from=95)
    figures = gpu_figures(trace, span=span, threshold=10, excluded=[(0, 10), (95, 100)])
    assert figures.mean_util == pytest.approx((90 * 80 + 5 * 10) / 100)
    assert figures.p95_util == 90
    assert figures.peak_memory_mib == 5000
    assert figures.energy_wh == pytest.approx(300.0)  # 300 W for an hour
    # Idle: the 10 low samples at 90..99 s, less the 5 s of lost time; startup's zeros not.
    assert figures.idle_seconds == pytest.approx(5)


def test_a_stopped_sampler_counts_no_more_than_the_gap_cap():
    assert energy_wh([(0, 100.0), (3600, 100.0)]) == pytest.approx(100 * 30 / 3600)
    assert energy_wh([(0, 100.0)]) is None


def test_percentile_is_nearest_rank():
    assert percentile(list(range(1, 101)), 0.95) == 95
    assert percentile([7.0], 0.95) == 7.0


def test_bottlenecks_with_the_articles_advice():
    def fig(util: float, node: str = "n1", index: int = 0, memory: float = 1000):
        trace = GpuTrace(node, index, utilization=samples(0, [util] * 5), memory_mib=[(0, memory)])
        return gpu_figures(trace, span=Span(0, 5, first_step=0), threshold=10, excluded=[])

    waiting = find_bottleneck([fig(90), fig(20, "n2", 1)], memory_total_mib=143771, stepped=True)
    assert waiting.kind == "waiting_on_ranks" and "GPU 1 on n2" in waiting.finding
    memory = find_bottleneck([fig(95, memory=140000)], memory_total_mib=143771, stepped=True)
    assert memory.kind == "memory_bound" and "map_location='cpu'" in memory.advice
    data = find_bottleneck([fig(30), fig(35, index=1)], memory_total_mib=143771, stepped=True)
    assert data.kind == "input_bound" and "num_workers" in data.advice
    assert "local NVMe" in data.advice
    busy = find_bottleneck([fig(95)], memory_total_mib=None, stepped=True)
    assert busy.kind == "none"


def test_build_card_mean_mfu_queued_and_parts():
    trace = GpuTrace("n1", 0, utilization=samples(100, [80.0] * 100))
    card = build_card(
        traces=[trace],
        span=Span(start=100, end=200, submitted=40, first_step=110),
        gpus=1,
        total_gpu_hours=100 / 3600,
        threshold_percent=10,
        mfu=[0.3, 0.5],
    )
    assert card.mean_mfu == pytest.approx(0.4)
    assert card.queued_gpu_hours * 3600 == pytest.approx(60)
    assert sum(card.parts.values()) == pytest.approx(card.gpu_hours)
    assert card.as_json()["per_gpu"][0]["node"] == "n1"


def test_memory_total_from_the_clusters_gpu_model():
    assert memory_total_for("NVIDIA H200") == 143771
    assert memory_total_for("h100 sxm") == 81559
    assert memory_total_for("MI300X") is None


RULE = Rule(
    threshold_percent=10, warn_after=timedelta(seconds=30), cancel_after=timedelta(seconds=20)
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_idle_stretch_needs_every_gpu_under_the_threshold():
    state = idle_advance(IdleState(), {"gpu/n1/0/utilization": samples(0, [0.0] * 40)}, 10)
    assert state.since_x == 0 and state.last_x == 39
    # A busy second GPU at the same times: never idle.
    both = {
        "gpu/n1/0/utilization": samples(0, [0.0] * 40),
        "gpu/n1/1/utilization": samples(0, [50.0] * 40),
    }
    busy = idle_advance(IdleState(), both, 10)
    assert busy.since_x is None or (busy.last_x or 0) - busy.since_x < 1


def test_samples_already_seen_are_not_taken_twice_and_late_busy_ones_still_count():
    first = idle_advance(IdleState(), {"gpu/n1/0/utilization": samples(0, [0.0] * 10)}, 10)
    again = idle_advance(first, {"gpu/n1/0/utilization": samples(0, [0.0] * 10)}, 10)
    assert again == first
    # The other node's file arrives a poll later, with a busy sample inside the stretch.
    late = idle_advance(first, {"gpu/n2/0/utilization": [(5.0, 80.0)]}, 10)
    assert late.since_x is None


def test_the_ladder_warns_then_cancels_only_after_both_windows_and_clears_when_busy():
    idle_31 = IdleState(since_x=0, last_x=31)
    assert (
        idle_action(state=IdleState(0, 29), rule=RULE, warned_at=None, cancel_at=None, now=NOW)
        is None
    )
    assert idle_action(state=idle_31, rule=RULE, warned_at=None, cancel_at=None, now=NOW) == "warn"
    later = NOW + timedelta(seconds=20)
    # Warned; the samples have not yet covered both windows: no cancel, even once it is time.
    assert idle_action(state=idle_31, rule=RULE, warned_at=NOW, cancel_at=later, now=later) is None
    idle_51 = IdleState(since_x=0, last_x=51)
    assert idle_action(state=idle_51, rule=RULE, warned_at=NOW, cancel_at=later, now=NOW) is None
    assert (
        idle_action(state=idle_51, rule=RULE, warned_at=NOW, cancel_at=later, now=later) == "cancel"
    )
    busy = IdleState(since_x=None, last_x=60)
    assert idle_action(state=busy, rule=RULE, warned_at=NOW, cancel_at=later, now=later) == "clear"
    no_cancel = Rule(10, timedelta(seconds=30), None)
    assert (
        idle_action(state=idle_51, rule=no_cancel, warned_at=NOW, cancel_at=None, now=later) is None
    )
