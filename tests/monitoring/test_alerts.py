"""Alert rules evaluated by the poll's ingest on output as jobs print it: each kind fires
when it should, once, and only for the rules of the job's owner or project."""

import math
import threading
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.utils import timezone

from jobs.enums import State
from jobs.models import Attempt
from jobs.rundir import STDOUT_FILE
from monitoring.alerts.evaluate import alert_fire, alerts_evaluate
from monitoring.alerts.rules import Fire, nonfinite_pattern, nonfinite_series
from monitoring.hangs.rules import HANG
from monitoring.models import Alert, AlertKind, AlertRule, AttemptProgress
from projects.models import Membership, Project
from tests import factories
from tests.security.ingest_helpers import ingest, reply_with, running

pytestmark = pytest.mark.django_db

# nanoGPT's iteration line (karpathy/nanoGPT train.py, as in tests/corpus/metrics/nanogpt.toml)
# and Hugging Face Trainer's log dict (tests/corpus/metrics/hf_trainer.toml, from
# https://github.com/AnswerDotAI/ModernBERT/issues/233), with the values a diverging run prints.
NANOGPT = "iter {i}: loss {loss}, time 98.21ms, mfu 12.41%\n"
HF_NAN = "{'loss': nan, 'grad_norm': nan, 'learning_rate': 9.774074342405685e-06, 'epoch': 0.53}\n"


@pytest.fixture
def attempt(project: Project, owner: User) -> Attempt:
    _, attempt = factories.job(project, owner, factories.cluster(), time_limit=timedelta(hours=1))
    attempt = running(attempt)
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(minutes=5))
    attempt.refresh_from_db()
    return attempt


def rule(owner: User, kind: str, **fields: object) -> AlertRule:
    return AlertRule.objects.create(owner=owner, kind=kind, **fields)


def poll(attempt: Attempt, text: str) -> None:
    attempt = Attempt.objects.select_related("job", "job__cluster").get(pk=attempt.pk)
    ingest([attempt], reply_with({attempt: {STDOUT_FILE: text.encode()}}))


def nanogpt(start: int, losses: list[str]) -> str:
    return "".join(NANOGPT.format(i=start + k, loss=v) for k, v in enumerate(losses))


def test_nan_loss_fires_once(attempt: Attempt, owner: User) -> None:
    nan = rule(owner, AlertKind.LOSS_NONFINITE)
    poll(attempt, nanogpt(1, ["2.5000", "2.4000"]))
    assert not Alert.objects.exists()  # finite losses
    poll(attempt, nanogpt(3, ["nan", "nan"]))
    poll(attempt, nanogpt(5, ["nan"]))  # still NaN the next poll: no second alert
    (alert,) = Alert.objects.all()
    assert (alert.rule, alert.attempt, alert.user) == (nan, attempt, owner)
    # The step where loss went non-finite (the first of the poll's NaNs), not the latest.
    assert alert.at_x == 3.0
    assert alert.message.endswith("loss is NaN or infinite at step 3")


def test_nan_alert_names_the_training_step_beside_gpu_samples(
    attempt: Attempt, owner: User
) -> None:
    """GPU samples' x is a Unix time: the alert's step is the training series' own."""
    rule(owner, AlertKind.LOSS_NONFINITE)
    gpu = [(attempt.pk, "gpu/n1/0/utilization", 1.79653e9 + k, 97.0) for k in range(3)]
    steps = [(attempt.pk, "loss", 11.0, 2.5), (attempt.pk, "lr", 11.0, 0.03)]
    steps += [(attempt.pk, "loss", 12.0, math.nan), (attempt.pk, "lr", 12.0, 0.03)]
    steps += [(attempt.pk, "loss", 13.0, math.inf), (attempt.pk, "lr", 13.0, 0.03)]
    attempt = Attempt.objects.select_related("job").get(pk=attempt.pk)
    (alert,) = alerts_evaluate(attempts=[attempt], points=gpu + steps)
    assert alert.at_x == 12.0
    assert alert.message.endswith("loss is NaN or infinite at step 12")


def test_nan_printed_where_no_step_is_read_says_by_the_last_training_step(
    attempt: Attempt, owner: User
) -> None:
    rule(owner, AlertKind.LOSS_NONFINITE)
    poll(attempt, "step 7 loss 2.5 lr 0.03\n")
    # A line too long to read for metrics (ingest's MAX_METRIC_LINE_CHARS): no point, but
    # the scan of the bytes still finds `loss: nan`.
    poll(attempt, "[" + "x" * 5000 + "] loss: nan\n")
    (alert,) = Alert.objects.all()
    assert alert.message.endswith("loss printed as NaN or infinite by step 7")


def test_nan_in_a_trainer_dict_and_other_names_stay_quiet(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.LOSS_NONFINITE, series="grad_norm")
    rule(owner, AlertKind.LOSS_NONFINITE, series="norm")  # `grad_norm` is not `norm`
    poll(attempt, HF_NAN)
    assert list(Alert.objects.values_list("rule__series", flat=True)) == ["grad_norm"]


def test_loss_above_a_bound_only_after_the_step(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.LOSS_ABOVE, threshold=3.0, step=10)
    poll(attempt, nanogpt(1, ["9.0000", "8.0000"]))  # high, but warm-up
    assert not Alert.objects.exists()
    poll(attempt, nanogpt(10, ["2.9000", "3.5000", "3.6000"]))
    (alert,) = Alert.objects.all()
    assert alert.at_x == 11.0
    assert "3.5 above 3" in alert.message


def test_throughput_drop_against_the_recent_median(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.THROUGHPUT_DROP, series="mfu", factor=2.0)
    lines = "".join(f"iter {i}: loss 2.0, time 98.21ms, mfu 12.{i:02d}%\n" for i in range(1, 7))
    poll(attempt, lines)
    poll(attempt, "iter 7: loss 2.0, time 98.21ms, mfu 7.00%\n")  # above 12 / 2
    assert not Alert.objects.exists()
    poll(attempt, "iter 8: loss 2.0, time 98.21ms, mfu 5.00%\n")
    (alert,) = Alert.objects.all()
    assert alert.at_x == 8.0
    assert "mfu 5 fell below" in alert.message


def test_started_and_ended_once_per_attempt(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.STARTED)
    ended = rule(owner, AlertKind.ENDED)
    poll(attempt, "")
    poll(attempt, "")
    assert list(Alert.objects.values_list("kind", flat=True)) == [AlertKind.STARTED]
    Attempt.objects.filter(pk=attempt.pk).update(state=State.FAILED)
    poll(attempt, "")
    poll(attempt, "")
    (alert,) = Alert.objects.filter(rule=ended)
    assert alert.message.endswith("ended: Failed")


def test_time_limit_close(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.TIME_LIMIT, threshold=10)
    poll(attempt, "")  # 55 minutes left
    assert not Alert.objects.exists()
    Attempt.objects.filter(pk=attempt.pk).update(started_at=timezone.now() - timedelta(minutes=52))
    poll(attempt, "")
    (alert,) = Alert.objects.all()
    assert "min left of its time limit" in alert.message


def test_no_progress_from_the_hang_verdict(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.NO_PROGRESS)
    AttemptProgress.objects.create(attempt=attempt, verdict="")
    poll(attempt, "")
    assert not Alert.objects.exists()
    AttemptProgress.objects.filter(attempt=attempt).update(verdict=HANG)
    poll(attempt, "")
    assert Alert.objects.get().message.endswith("no progress (hang)")


def test_only_the_owners_and_the_projects_rules(
    attempt: Attempt, owner: User, member: User, project: Project, outsider: User
) -> None:
    rule(member, AlertKind.STARTED)  # another member's personal rule: not for olivia's job
    rule(outsider, AlertKind.STARTED)
    for_project = rule(member, AlertKind.STARTED, project=project)
    poll(attempt, "")
    assert not Alert.objects.exists()  # mia is no owner of the project: her rule waits
    Membership.objects.filter(user=member).update(role=Membership.Role.OWNER)
    poll(attempt, "")
    assert [a.rule for a in Alert.objects.all()] == [for_project]
    assert Alert.objects.get().user == member


def test_queries_do_not_grow_with_points(
    attempt: Attempt, owner: User, django_assert_max_num_queries: object
) -> None:
    rule(owner, AlertKind.LOSS_ABOVE, threshold=100.0)
    rule(owner, AlertKind.THROUGHPUT_DROP, series="mfu")
    attempt = Attempt.objects.select_related("job").get(pk=attempt.pk)
    points = [(attempt.pk, "mfu", float(i), 10.0) for i in range(2000)]
    with django_assert_max_num_queries(4):  # type: ignore[operator]
        # rules, state rows, alerts fired this hour, the state upsert
        alerts_evaluate(attempts=[attempt], points=points)


def test_the_database_keeps_one_per_rule_and_job_per_hour(attempt: Attempt, owner: User) -> None:
    nan = rule(owner, AlertKind.LOSS_NONFINITE)
    now = timezone.now()
    assert alert_fire(rule=nan, attempt=attempt, fire=Fire("a"), now=now) is not None
    assert alert_fire(rule=nan, attempt=attempt, fire=Fire("b"), now=now) is None
    later = now + timedelta(hours=1)
    assert alert_fire(rule=nan, attempt=attempt, fire=Fire("c"), now=later) is not None


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_evaluations_fire_once(attempt: Attempt, owner: User) -> None:
    rule(owner, AlertKind.STARTED)
    rule(owner, AlertKind.LOSS_ABOVE, threshold=1.0)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def evaluate() -> None:
        try:
            mine = Attempt.objects.select_related("job").get(pk=attempt.pk)
            barrier.wait()
            alerts_evaluate(attempts=[mine], points=[(mine.pk, "loss", 5.0, 2.0)])
        except BaseException as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=evaluate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(Alert.objects.values_list("kind", flat=True)) == [
        AlertKind.LOSS_ABOVE,
        AlertKind.STARTED,
    ]


@pytest.mark.parametrize(
    ("line", "names", "found"),
    [
        # Megatron-LM's training_log (tests/corpus/metrics/megatron_lm.toml) as a run diverges.
        (
            " iteration      100/    1000 | lm loss: nan | loss scale: 65536.0 |",
            ["lm_loss", "loss"],
            {"lm_loss"},
        ),
        ('{"step": 7, "loss": NaN}', ["loss"], {"loss"}),  # metrics.jsonl from Python's json
        ("step 7 loss=-inf", ["loss"], {"loss"}),
        ("val_loss=nan train/loss=nan", ["loss"], set()),  # other series
        ("loss=nanometer loss=0.5 info", ["loss"], set()),  # not a value
    ],
)
def test_nonfinite_names_in_printed_lines(line: str, names: list[str], found: set[str]) -> None:
    pattern = nonfinite_pattern(names)
    assert nonfinite_series(pattern, line.encode(), names) == found
