"""Goodput on real PostgreSQL: the card of a restarted attempt, the idle ladder, page and API."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail
from django.test import Client

from jobs.billing import attempt_charge, attempt_reserve
from jobs.enums import State
from jobs.models import Attempt, JobEvent
from monitoring.goodput.card import attempt_card_compute, efficiency_cards_refresh
from monitoring.goodput.idle import Rule, attempt_idle_check
from monitoring.models import AttemptActivity, AttemptProgress, Checkpoint, EfficiencyCard
from monitoring.series.write import series_append
from projects.models import IdlePolicy, UsageCharge
from tests import factories

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def gpu_points(attempt: Attempt, start: datetime, values: list[float], gpu: int = 0) -> None:
    x0 = start.timestamp()
    series_append(
        points=[
            (attempt.pk, f"gpu/n1/{gpu}/{metric}", x0 + i, value)
            for i, util in enumerate(values)
            for metric, value in (("utilization", util), ("power", 75 + 5 * util))
        ]
    )


@pytest.fixture
def restarted(project, owner):
    """Attempt 1 ran 600 s on 2 GPUs (first step at 60 s, checkpoint at 400 s); attempt 2 resumed."""
    job, first = factories.job(project, owner, factories.cluster(), gpus_per_node=2)
    attempt_reserve(attempt=first)
    Attempt.objects.filter(pk=first.pk).update(
        state=State.FAILED,
        run_dir="/scratch/run-1",
        slurm_job_id="41",
        submitted_at=T0 - timedelta(seconds=30),
        started_at=T0,
        ended_at=T0 + timedelta(seconds=600),
        diagnosed_at=T0 + timedelta(seconds=601),
        files_complete=True,
    )
    first.refresh_from_db()
    AttemptActivity.objects.create(attempt=first, first_step_at=T0 + timedelta(seconds=60))
    Checkpoint.objects.create(
        attempt=first, name="step-40.pt", step=40, size=10, modified_at=T0 + timedelta(seconds=400)
    )
    # GPU 0 busy after startup; GPU 1 idle for 100 s in the middle of the productive part.
    gpu_points(first, T0, [0.0] * 60 + [90.0] * 540, gpu=0)
    gpu_points(first, T0, [0.0] * 60 + [90.0] * 140 + [0.0] * 100 + [90.0] * 300, gpu=1)
    Attempt.objects.create(job=job, number=2, resume_from="/scratch/run-1/checkpoints/step-40.pt")
    return job, first


def test_the_card_of_a_restarted_attempt_sums_to_its_charge_and_loses_from_the_checkpoint(
    restarted,
) -> None:
    _, first = restarted
    attempt_card_compute(attempt=first)  # before the charge: the portal's times
    assert EfficiencyCard.objects.get(attempt=first).from_ledger is False
    charge = attempt_charge(attempt=first, measured=None)
    assert charge is not None
    assert efficiency_cards_refresh() == 1  # recomputed against the ledger
    card = EfficiencyCard.objects.get(attempt=first)
    assert card.from_ledger is True
    parts = card.data["parts"]
    assert sum(parts.values()) == pytest.approx(float(charge.gpu_hours), rel=0.01)
    assert parts["startup"] * 3600 == pytest.approx(2 * 60)
    assert parts["lost"] * 3600 == pytest.approx(2 * 200)  # checkpoint at 400 s to the end
    assert parts["idle"] * 3600 == pytest.approx(100)  # GPU 1's idle stretch
    assert card.data["resumed_step"] == 40
    assert card.data["queued_gpu_hours"] * 3600 == pytest.approx(2 * 30)
    by_gpu = {g["index"]: g for g in card.data["per_gpu"]}
    assert by_gpu[0]["mean_util"] == pytest.approx(90 * 540 / 600)
    assert by_gpu[0]["p95_util"] == 90
    assert by_gpu[0]["energy_wh"] > by_gpu[1]["energy_wh"]
    assert efficiency_cards_refresh() == 0  # nothing left to do


def test_a_hung_attempt_counts_from_its_last_step_to_its_end_as_hung(restarted) -> None:
    """The hang detector's verdict: no rank stepped after 480 s of the 600 s attempt."""
    _, first = restarted
    last_step = (T0 + timedelta(seconds=480)).timestamp()
    AttemptProgress.objects.create(
        attempt=first,
        verdict="hang",
        ranks={
            "0": {"node": "n1", "step": 45, "step_at": last_step - 5},
            "1": {"step_at": last_step},
        },
    )
    charge = attempt_charge(attempt=first, measured=None)
    assert charge is not None
    attempt_card_compute(attempt=first)
    parts = EfficiencyCard.objects.get(attempt=first).data["parts"]
    assert parts["hung"] * 3600 == pytest.approx(2 * 120)  # both GPUs, 480 s to 600 s
    assert sum(parts.values()) == pytest.approx(float(charge.gpu_hours), rel=0.01)


def test_declared_pauses_count_every_pause_of_the_attempt_not_only_the_current_one(
    restarted,
) -> None:
    """Rank 0 ended pauses of 50 s in all; rank 1 ended 30 s and was in one from 350 s, cut
    where the lost work starts (the checkpoint at 400 s): 80 s, the longer rank's."""
    _, first = restarted
    AttemptProgress.objects.create(
        attempt=first,
        ranks={
            "0": {"node": "n1", "step": 45, "step_at": T0.timestamp() + 340, "paused": 50.0},
            "1": {
                "node": "n1",
                "step": 45,
                "step_at": T0.timestamp() + 340,
                "pause": "checkpoint",
                "pause_since": T0.timestamp() + 350,
                "paused": 30.0,
            },
        },
    )
    charge = attempt_charge(attempt=first, measured=None)
    assert charge is not None
    card = attempt_card_compute(attempt=first)
    assert card is not None
    assert card.data["parts"]["declared_pauses"] * 3600 == pytest.approx(2 * 80)
    assert card.declared_pauses_gpu_hours == card.data["parts"]["declared_pauses"]
    assert card.data["parts"]["idle"] == 0  # GPU 1's 100 idle seconds were inside the pauses
    assert sum(card.data["parts"].values()) == pytest.approx(float(charge.gpu_hours), rel=0.01)
    assert card.gpu_hours == pytest.approx(float(charge.gpu_hours))
    assert card.ended_at == charge.ended_at


def test_the_job_page_and_api_show_the_card_to_members_and_refuse_outsiders(
    restarted, owner, outsider, django_assert_max_num_queries
) -> None:
    job, first = restarted
    attempt_charge(attempt=first, measured=None)
    attempt_card_compute(attempt=first)
    client = Client()
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "Where attempt 1's GPU-hours went" in page
    assert 'data-part="lost"' in page and "resumed from step 40" in page
    with django_assert_max_num_queries(8):  # session, user, job, attempts, cards, policy...
        data = client.get(f"/api/v1/jobs/{job.pk}/efficiency").json()
    (card,) = data["cards"]
    assert card["attempt"] == 1 and card["resumed_step"] == 40
    assert {row["part"] for row in card["rows"]} >= {"productive", "lost", "idle", "hung"}
    assert card["bottleneck"]["kind"] in {"input_bound", "waiting_on_ranks", "none"}
    assert data["idle"] is None  # nothing runs
    stranger = Client()
    stranger.force_login(outsider)
    assert stranger.get(f"/api/v1/jobs/{job.pk}/efficiency").status_code == 404
    assert stranger.get(f"/jobs/{job.pk}/").status_code == 404


RULE = Rule(
    threshold_percent=10, warn_after=timedelta(seconds=30), cancel_after=timedelta(seconds=20)
)


def idle_policy_as_rule(project, owner) -> None:
    """The project's idle policy is RULE, and its owner gets mail."""
    IdlePolicy.objects.create(
        project=project,
        threshold_percent=RULE.threshold_percent,
        warn_after=RULE.warn_after,
        cancel_after=RULE.cancel_after,
    )
    owner.email = "owner@example.org"
    owner.save()


@pytest.fixture
def running(project, owner):
    idle_policy_as_rule(project, owner)
    job, attempt = factories.job(project, owner, factories.cluster(), gpus_per_node=1)
    Attempt.objects.filter(pk=attempt.pk).update(
        state=State.RUNNING, slurm_job_id="77", started_at=T0, run_dir="/scratch/run-77"
    )
    attempt.refresh_from_db()
    return job, attempt


def test_idle_gpus_are_warned_by_page_and_mail_then_cancelled(
    running, owner, eager_celery, django_capture_on_commit_callbacks
) -> None:
    job, attempt = running
    now = T0 + timedelta(seconds=40)
    gpu_points(attempt, T0, [2.0] * 35)
    with django_capture_on_commit_callbacks(execute=True):
        assert attempt_idle_check(attempt=attempt, rule=RULE, now=now) == "warn"
    activity = AttemptActivity.objects.get(attempt=attempt)
    assert activity.warned_at == now and activity.cancel_at == now + timedelta(seconds=20)
    (warning,) = mail.outbox
    assert "GPUs idle" in warning.subject and "will be cancelled at" in warning.body
    client = Client()
    client.force_login(owner)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="idle-warned-at"' in page and 'id="idle-cancel-at"' in page
    assert "under 10 %" in page
    assert JobEvent.objects.filter(attempt=attempt, reason__startswith="GPUs idle").exists()
    # Still idle past both windows and the planned time: cancelled, once.
    gpu_points(attempt, T0 + timedelta(seconds=35), [1.0] * 20)
    later = now + timedelta(seconds=21)
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert attempt_idle_check(attempt=attempt, rule=RULE, now=later) == "cancel"
    assert len(queued) == 1  # the scancel task
    attempt.refresh_from_db()
    assert attempt.cancel_requested_at is not None
    assert JobEvent.objects.filter(attempt=attempt, reason__contains="idle-GPU policy").count() == 1


def test_busy_gpus_lift_the_warning_and_are_never_cancelled(running) -> None:
    _, attempt = running
    gpu_points(attempt, T0, [0.0] * 35)
    assert attempt_idle_check(attempt=attempt, rule=RULE, now=T0 + timedelta(seconds=40)) == "warn"
    gpu_points(attempt, T0 + timedelta(seconds=35), [80.0] * 60)
    late = T0 + timedelta(seconds=100)
    assert attempt_idle_check(attempt=attempt, rule=RULE, now=late) == "clear"
    assert attempt_idle_check(attempt=attempt, rule=RULE, now=late) is None
    attempt.refresh_from_db()
    assert attempt.cancel_requested_at is None
    assert not UsageCharge.objects.exists()
