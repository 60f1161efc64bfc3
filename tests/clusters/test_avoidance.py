"""Avoided nodes: periods that grow with repeats, the admin's pin and clear, and the rule
that never leaves a job unable to fit."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.test import override_settings
from django.utils import timezone

from clusters.avoidance import (
    avoidance_fit,
    avoided_nodes,
    node_avoid,
    node_avoid_clear,
    node_avoid_pin,
    node_clears,
)
from tests import factories

PARTITION = ["n1", "n2", "n3", "n4"]


def _fit(own: list[str], avoided: list[str], needed: int, nodes: list[str] = PARTITION):
    return avoidance_fit(
        own=own,
        avoided={n: f"{n} is bad" for n in avoided},
        nodes_needed=needed,
        partition="gpu",
        partition_nodes=nodes,
    )


def test_avoided_nodes_are_left_out_while_the_job_fits() -> None:
    fit = _fit([], ["n2", "n3"], needed=2)
    assert fit.excluded == ["n2", "n3"]
    assert fit.avoided == {"n2": "n2 is bad", "n3": "n3 is bad"}
    assert fit.kept_note == ""


@pytest.mark.parametrize("needed", [1, 2, 3, 4])
@pytest.mark.parametrize("own", [[], ["n1"], ["n1", "n4"]])
def test_a_job_needing_n_of_m_nodes_never_has_more_than_m_minus_n_left_out(needed, own) -> None:
    fit = _fit(own, ["n4", "n3", "n2", "n1"], needed=needed)
    avoided_out = [n for n in fit.excluded if n not in own]
    # Its own exclusions stay (a restart's failed node); avoided ones only fill the room.
    assert fit.excluded[: len(own)] == own
    assert len(avoided_out) == max(0, len(PARTITION) - needed - len(own))
    assert len(set(fit.excluded)) == len(fit.excluded)


def test_the_worst_first_are_left_out_and_the_rest_kept_with_a_reason() -> None:
    fit = _fit([], ["n3", "n1", "n2"], needed=2)
    assert fit.excluded == ["n3", "n1"]
    assert "n2 is judged bad but not left out" in fit.kept_note
    assert "needs 2 of partition gpu's 4 nodes" in fit.kept_note


def test_a_job_needing_every_node_has_none_left_out() -> None:
    fit = _fit([], ["n2"], needed=4)
    assert fit.excluded == [] and fit.avoided == {}
    assert "n2 is judged bad but not left out" in fit.kept_note


def test_an_avoided_node_outside_the_partition_changes_nothing() -> None:
    fit = _fit([], ["x9", "n2"], needed=1)
    assert fit.excluded == ["n2"]
    assert fit.kept_note == ""


@override_settings(NODE_AVOID_HOURS=24.0, NODE_AVOID_MAX_HOURS=72.0)
def test_a_node_bad_again_is_avoided_twice_as_long_up_to_the_maximum(db) -> None:
    cluster = factories.cluster()
    now = timezone.now()
    lengths = []
    for _ in range(4):
        period = node_avoid(cluster=cluster, node="n2", reason="bad", now=now)
        assert period is not None and period.until is not None
        lengths.append(period.until - period.since)
        assert node_avoid(cluster=cluster, node="n2", reason="bad", now=now) is None  # held
        now = period.until + timedelta(minutes=1)
    assert lengths == [timedelta(hours=h) for h in (24, 48, 72, 72)]


def test_an_active_period_ends_at_its_until(db) -> None:
    cluster = factories.cluster()
    now = timezone.now()
    node_avoid(cluster=cluster, node="n2", reason="bad", now=now)
    assert set(avoided_nodes(cluster=cluster, at=now)) == {"n2"}
    assert avoided_nodes(cluster=cluster, at=now + timedelta(days=2)) == {}
    assert avoided_nodes(cluster=factories.cluster("other"), at=now) == {}


def test_staff_pin_a_node_until_they_clear_it(staff) -> None:
    cluster = factories.cluster()
    pinned = node_avoid_pin(cluster=cluster, node="n3", reason="flaky link", user=staff)
    assert pinned.until is None and "flaky link (pinned by" in pinned.reason
    later = timezone.now() + timedelta(days=365)
    assert set(avoided_nodes(cluster=cluster, at=later)) == {"n3"}
    assert node_avoid_clear(cluster=cluster, node="n3", user=staff) == 1
    assert avoided_nodes(cluster=cluster) == {}
    assert set(node_clears(cluster=cluster)) == {"n3"}


def test_clearing_a_node_never_avoided_is_remembered_for_the_ledger(staff) -> None:
    cluster = factories.cluster()
    assert node_avoid_clear(cluster=cluster, node="n1", user=staff) == 0
    assert avoided_nodes(cluster=cluster) == {}
    assert set(node_clears(cluster=cluster)) == {"n1"}


def test_a_member_may_neither_pin_nor_clear(member) -> None:
    cluster = factories.cluster()
    with pytest.raises(PermissionDenied):
        node_avoid_pin(cluster=cluster, node="n3", reason="", user=member)
    node_avoid(cluster=cluster, node="n3", reason="bad")
    with pytest.raises(PermissionDenied):
        node_avoid_clear(cluster=cluster, node="n3", user=member)
    assert set(avoided_nodes(cluster=cluster)) == {"n3"}
