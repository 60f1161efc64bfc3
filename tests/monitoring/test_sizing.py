"""Right-sizing from history on real PostgreSQL: which past runs count as the same command,
the time limit from their p95 with its basis, and the warnings before submit. The GPU
figures are efficiency cards computed from GPU samples (monitoring.goodput.card)."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from jobs.billing import attempt_charge, attempt_reserve
from jobs.enums import State, Template
from jobs.models import Attempt
from monitoring.goodput.card import attempt_card_compute
from monitoring.runs.sizing import History, collapsed, gpu_shape, past_runs, rounded_up, sizing
from monitoring.series.write import series_append
from projects.models import Membership, Project, UsageCharge
from projects.services import Measured
from tests import factories
from tests.jobs.test_views import _form

pytestmark = pytest.mark.django_db

COMMAND = "python train.py --epochs 3"


def _ran(
    project: Project,
    user: User,
    cluster: Cluster,
    minutes: float,
    *,
    state: State = State.COMPLETED,
    ended_ago: timedelta = timedelta(hours=1),
    **job: object,
) -> Attempt:
    """One attempt of a job that ran `minutes` and ended `ended_ago`."""
    values: dict[str, object] = {"command": COMMAND, **job}
    _, attempt = factories.job(project, user, cluster, **values)
    ended = timezone.now() - ended_ago
    Attempt.objects.filter(pk=attempt.pk).update(
        state=state,
        submitted_at=ended - timedelta(minutes=minutes + 1),
        started_at=ended - timedelta(minutes=minutes),
        ended_at=ended,
    )
    attempt.refresh_from_db()
    return attempt


def _history(project: Project, user: User, command: str = COMMAND, **kw: object) -> History:
    values: dict[str, object] = {"template": Template.COMMAND, **kw}
    return past_runs(
        project_id=project.pk,
        project=project.slug,
        user_id=user.pk,
        command=command,
        now=timezone.now(),
        **values,  # type: ignore[arg-type]
    )


def _gpu_samples(attempt: Attempt, *utils: float, seconds: int = 120) -> None:
    """Each GPU's utilisation held for `seconds` (one sample a second) and 20-30 GiB memory."""
    assert attempt.started_at is not None
    start = attempt.started_at.timestamp()
    series_append(
        points=[
            (attempt.pk, f"gpu/n1/{gpu}/{metric}", start + i, value)
            for gpu, util in enumerate(utils)
            for i in range(seconds)
            for metric, value in (("utilization", util), ("memory_used", 20480.0 + 5120 * gpu))
        ]
    )


@pytest.fixture
def colleague(django_user_model: type[User], project: Project) -> User:
    user = django_user_model.objects.create_user(username="carl")
    Membership.objects.create(user=user, project=project, role=Membership.Role.MEMBER)
    return user


def test_the_same_command_is_the_same_template_and_text_in_the_project_up_to_white_space(
    project: Project, member: User, cluster: Cluster, django_assert_num_queries
) -> None:
    other = Project.objects.create(slug="nlp", name="NLP", slurm_account="nlp")
    same = [
        _ran(project, member, cluster, 10),
        _ran(project, member, cluster, 11, command="  python  train.py\r\n--epochs 3\n"),
        _ran(project, member, cluster, 12, state=State.TIMEOUT),
    ]
    _ran(project, member, cluster, 13, command="python train.py --epochs 30")  # another flag
    _ran(project, member, cluster, 14, template=Template.TORCHRUN)
    _ran(other, member, cluster, 15)
    _ran(project, member, cluster, 16, state=State.FAILED)  # never ran to its end
    _ran(project, member, cluster, 17, state=State.CANCELLED)
    _ran(project, member, cluster, 18, ended_ago=timedelta(days=200))  # too old
    _, never_started = factories.job(project, member, cluster, command=COMMAND)
    Attempt.objects.filter(pk=never_started.pk).update(state=State.TIMEOUT, ended_at=timezone.now())

    with django_assert_num_queries(1):  # the matching attempts with their charges and cards
        history = _history(project, member, command="python train.py   --epochs 3")
    assert sorted(run.attempt_id for run in history.runs) == sorted(a.pk for a in same)
    assert sorted(round(run.seconds / 60) for run in history.runs) == [10, 11, 12]
    assert [run.timed_out for run in history.runs if round(run.seconds / 60) == 12] == [True]
    assert history.mine is True
    assert collapsed(" a \t b\r\nc ") == "a b c"


def test_the_submitters_own_runs_first_else_the_projects(
    project: Project, member: User, colleague: User, cluster: Cluster
) -> None:
    for minutes in (10, 20):
        _ran(project, member, cluster, minutes)
    for minutes in (30, 40, 50):
        _ran(project, colleague, cluster, minutes)
    mine = _history(project, member)
    assert (len(mine.runs), mine.mine) == (5, False)  # two of hers are too few: the project's
    assert _history(project, colleague).mine is True  # his three are enough
    found = sizing(history=mine, time_limit=timedelta(hours=1), gpus=1)
    assert found.basis.startswith("p95 of 5 past runs in vision: ")


def test_the_time_limit_is_the_p95_with_a_margin_rounded_up_with_its_basis(
    project: Project, member: User, cluster: Cluster
) -> None:
    for minutes in (20, 25, 30, 32, 35, 38, 40):
        _ran(project, member, cluster, minutes)
    found = sizing(history=_history(project, member), time_limit=timedelta(hours=1), gpus=1)
    # p95 of 7 at rank 5.7: 38 + 0.7 x 2 = 39.4 min; x 1.25 = 49.25 -> 50 min.
    assert found.p95 == timedelta(minutes=39.4)
    assert found.time_limit == timedelta(minutes=50)
    assert found.basis == "p95 of your 7 past runs: 39 min; suggested 50 min (+25%, rounded up)."
    assert found.warnings == ()  # an hour is 1.5 times the p95


def test_a_time_limit_five_times_the_p95_is_warned_about_naming_the_figure(
    project: Project, member: User, cluster: Cluster
) -> None:
    for minutes in (10, 11, 12):
        _ran(project, member, cluster, minutes)
    history = _history(project, member)  # p95: 11.9 min
    assert sizing(history=history, time_limit=timedelta(minutes=59), gpus=1).warnings == ()
    found = sizing(history=history, time_limit=timedelta(hours=1), gpus=1)
    assert [(w.kind, w.text) for w in found.warnings] == [
        (
            "time_limit",
            "The time limit, 1 h, is 5.0 times the p95 of your 3 past runs (12 min): a limit "
            "near 15 min reserves fewer GPU-hours and can start sooner (Slurm backfills short "
            "jobs).",
        )
    ]


def test_runs_that_hit_their_time_limit_at_the_p95_make_it_no_upper_bound(
    project: Project, member: User, cluster: Cluster
) -> None:
    _ran(project, member, cluster, 10)
    _ran(project, member, cluster, 10)
    _ran(project, member, cluster, 30, state=State.TIMEOUT)
    found = sizing(history=_history(project, member), time_limit=timedelta(hours=5), gpus=1)
    assert found.warnings == ()
    assert found.basis.endswith(
        "1 run of them hit the time limit: they needed longer, so this may be short."
    )


def test_too_few_runs_size_nothing_and_say_why(
    project: Project, member: User, cluster: Cluster
) -> None:
    _ran(project, member, cluster, 10)
    found = sizing(history=_history(project, member), time_limit=timedelta(hours=9), gpus=8)
    assert (found.time_limit, found.warnings) == (None, ())
    assert found.message == (
        "Only 1 past run of this command in vision (the last 180 days): 3 are needed to size from."
    )


def test_the_ledgers_elapsed_time_is_the_run_time_when_charged(
    project: Project, member: User, cluster: Cluster
) -> None:
    """sacct says 7 min of the 10 the portal saw."""
    attempt = _ran(project, member, cluster, 10)
    attempt_reserve(attempt=attempt)
    assert attempt.ended_at is not None
    sacct = Measured(
        gpus=1,
        cpus=1,
        nodes=1,
        started_at=attempt.ended_at - timedelta(minutes=7),
        ended_at=attempt.ended_at,
        source=UsageCharge.Source.SACCT,
    )
    assert attempt_charge(attempt=attempt, measured=sacct) is not None
    assert [run.seconds for run in _history(project, member).runs] == [7 * 60]


def test_gpus_past_runs_left_idle_are_warned_about_from_their_efficiency_cards(
    project: Project, member: User, cluster: Cluster
) -> None:
    for minutes in (10, 11, 12):
        attempt = _ran(project, member, cluster, minutes, gpus_per_node=2)
        _gpu_samples(attempt, 80.0, 0.0)  # GPU 1 never worked
        assert attempt_card_compute(attempt=attempt) is not None
    history = _history(project, member)
    assert [run.busy_gpus for run in history.runs] == [1, 1, 1]

    found = sizing(history=history, time_limit=timedelta(minutes=20), gpus=2)
    assert found.gpus == 1
    assert [(w.kind, w.text) for w in found.warnings] == [
        (
            "idle_gpus",
            "You ask for 2 GPUs; your 3 past runs with 2 or more kept at most 1 GPU busy: "
            "the others would sit idle.",
        )
    ]
    assert found.facts == (
        "GPU memory peaked at 25.0 GiB per GPU over 3 runs.",
        "Busy GPUs averaged 80 % utilisation.",
    )
    # One GPU is what they used; four would be a bigger run than any: no evidence of idling.
    assert sizing(history=history, time_limit=timedelta(minutes=20), gpus=1).warnings == ()
    assert sizing(history=history, time_limit=timedelta(minutes=20), gpus=4).warnings == ()


def test_a_run_whose_card_misses_some_of_its_gpus_says_nothing_of_their_use(
    project: Project, member: User, cluster: Cluster
) -> None:
    """Two nodes of 2 GPUs, samples from one node only (its sampler on the other wrote none)."""
    for minutes in (10, 11, 12):
        attempt = _ran(project, member, cluster, minutes, nodes=2, gpus_per_node=2)
        _gpu_samples(attempt, 80.0, 70.0)
        assert attempt_card_compute(attempt=attempt) is not None
    history = _history(project, member)
    assert [run.busy_gpus for run in history.runs] == [None, None, None]
    found = sizing(history=history, time_limit=timedelta(minutes=20), gpus=4)
    assert (found.gpus, found.warnings) == (None, ())
    assert found.facts[0] == "GPU memory peaked at 25.0 GiB per GPU over 3 runs."


def test_a_suggested_gpu_count_keeps_the_gpus_per_node_when_one_node_cannot_hold_it() -> None:
    assert gpu_shape(total=1, gpus_per_node=4) == (1, 1)
    assert gpu_shape(total=6, gpus_per_node=4) == (2, 4)
    assert rounded_up(timedelta(minutes=61)) == timedelta(minutes=75)
    assert rounded_up(timedelta(hours=6, seconds=1)) == timedelta(hours=7)
    assert rounded_up(timedelta(0)) == timedelta(minutes=5)


def test_the_preview_carries_the_sizing_with_the_values_its_buttons_set(
    client: Client,
    project: Project,
    member: User,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    for minutes in (10, 11, 12):
        attempt = _ran(project, member, cluster, minutes, gpus_per_node=2, partition="gpu")
        _gpu_samples(attempt, 80.0, 0.0)
        attempt_card_compute(attempt=attempt)
    client.force_login(member)
    form = _form(cluster, project, command=COMMAND, time_limit="1:00:00", gpus_per_node=2)
    found = client.post(reverse("job-preview"), form).json()["sizing"]
    assert found["ok"] is True
    assert found["time_limit"] == {
        "value": "0:15:00",
        "text": "15 min",
        "seconds": 900,
        "asked": False,
    }
    assert found["gpus"] == {"nodes": 1, "gpus_per_node": 1, "text": "1 GPU"}
    assert [w["kind"] for w in found["warnings"]] == ["time_limit", "idle_gpus"]
    assert "5.0 times the p95" in found["warnings"][0]["text"]


def test_an_outsider_sees_no_sizing_from_a_project_not_theirs(
    client: Client,
    project: Project,
    member: User,
    outsider: User,
    cluster: Cluster,
    service_account: ClusterAccount,
) -> None:
    for minutes in (10, 11, 12):
        _ran(project, member, cluster, minutes)
    client.force_login(outsider)
    found = client.post(reverse("job-preview"), _form(cluster, project, command=COMMAND)).json()
    assert "project" in found["errors"]
    assert found["sizing"] == {"ok": False, "message": ""}
