"""A node's score: signals fade with time and with healthy jobs run since; the verdicts."""

from datetime import UTC, datetime, timedelta

from monitoring.nodes.score import BAD, HEALTHY, SUSPECT, ScorePolicy, Signal, node_score, verdict

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
POLICY = ScorePolicy(half_life_hours=24.0, healthy_factor=0.5, suspect=1.0, bad=2.5)


def _score(signals: list[Signal], healthy_jobs: int = 0) -> float:
    return node_score(signals, now=NOW, healthy_jobs=healthy_jobs, policy=POLICY)


def test_a_fresh_signal_weighs_its_weight() -> None:
    assert _score([Signal(1.0, NOW, 0)]) == 1.0


def test_a_signal_halves_every_half_life() -> None:
    assert _score([Signal(1.0, NOW - timedelta(hours=24), 0)]) == 0.5
    assert _score([Signal(1.0, NOW - timedelta(hours=72), 0)]) == 0.125


def test_each_healthy_job_since_halves_a_signal_and_jobs_before_it_do_not() -> None:
    # The signal came when the node had run 5 healthy jobs; it has run 7 now: 2 since.
    assert _score([Signal(1.0, NOW, 5)], healthy_jobs=7) == 0.25
    assert _score([Signal(1.0, NOW, 7)], healthy_jobs=7) == 1.0


def test_a_healthy_job_factor_of_one_ignores_healthy_jobs() -> None:
    policy = ScorePolicy(half_life_hours=24.0, healthy_factor=1.0)
    assert node_score([Signal(2.0, NOW, 0)], now=NOW, healthy_jobs=50, policy=policy) == 2.0


def test_signals_add_up() -> None:
    signals = [Signal(1.0, NOW, 0), Signal(1.0, NOW, 0), Signal(0.7, NOW - timedelta(hours=24), 0)]
    assert abs(_score(signals) - 2.35) < 1e-9


def test_a_signal_from_the_future_is_not_worth_more() -> None:
    assert _score([Signal(1.0, NOW + timedelta(hours=5), 0)]) == 1.0


def test_verdicts_start_at_their_thresholds() -> None:
    assert verdict(0.0, POLICY) == HEALTHY
    assert verdict(0.99, POLICY) == HEALTHY
    assert verdict(1.0, POLICY) == SUSPECT
    assert verdict(2.49, POLICY) == SUSPECT
    assert verdict(2.5, POLICY) == BAD


def test_three_gpu_faults_in_a_day_are_bad_and_fade_to_healthy() -> None:
    faults = [Signal(1.0, NOW - timedelta(hours=h), 0) for h in (1, 5, 9)]
    assert verdict(_score(faults), POLICY) == BAD
    later = NOW + timedelta(days=4)
    faded = node_score(faults, now=later, healthy_jobs=0, policy=POLICY)
    assert verdict(faded, POLICY) == HEALTHY
    # Or three healthy jobs on it the same day: the node earned its place back.
    assert verdict(_score(faults, healthy_jobs=3), POLICY) == HEALTHY


def test_one_persons_signals_alone_make_a_node_suspect_never_bad() -> None:
    policy = ScorePolicy(bad=2.5, bad_min_users=2)
    assert verdict(3.0, policy, users=1) == SUSPECT
    assert verdict(3.0, policy, users=2) == BAD
    assert verdict(3.0, policy) == BAD  # the number of people unknown: the score decides
