"""Planning a bigger run from a finished one: the arithmetic by hand, and the form's plan."""

import dataclasses
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster, ClusterAccount
from jobs.enums import State
from jobs.estimate import Room
from jobs.models import CodeSnapshot, Job
from monitoring.models import RunSummary
from monitoring.runs.plan import (
    GLOBAL_BATCH,
    PER_GPU_BATCH,
    CannotPlan,
    Efficiency,
    Plan,
    efficiency_for,
    efficiency_measured,
    measured_run,
    run_plan,
    target_steps,
)
from projects.models import Project, Quota
from projects.quota import QuotaRequest
from projects.selectors import Held, Usage
from tests import factories
from tests.jobs.test_views import _form

# --- the arithmetic, no database ----------------------------------------------------------

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def _room(left: str = "70") -> Room:
    usage = Usage(
        period="month",
        period_start=NOW,
        period_end=NOW + timedelta(days=31),
        budget_gpu_hours=Decimal("100"),
        used_gpu_hours=Decimal("100") - Decimal(left),
        reserved_gpu_hours=Decimal(0),
        left_gpu_hours=Decimal(left),
        fraction_used=0.3,
    )
    quota = Quota(gpu_hours_per_period=Decimal("100"), max_wall_time=timedelta(hours=12))
    return Room(quota=quota, held=Held(), usage=usage)


def _target(gpus_per_node: int = 4, nodes: int = 2) -> QuotaRequest:
    cluster = Cluster(
        name="alps", price_per_gpu_hour=Decimal("2.50"), price_per_cpu_hour=Decimal("0.10")
    )
    return QuotaRequest(
        project=Project(slug="vision"),
        cluster=cluster,
        partition="gpu",
        gpus=gpus_per_node * nodes,
        cpus=nodes * 4,
        nodes=nodes,
        time_limit=timedelta(hours=1),
    )


def _finished(pk: int = 1, gpus: int = 2, state: str = State.COMPLETED) -> Job:
    return Job(pk=pk, name="small", nodes=1, gpus_per_node=gpus, state=state)


def _summary(**values: object) -> RunSummary:
    fields: dict[str, object] = {
        "throughput": 1000.0,
        "throughput_unit": "samples",
        # [last, min, max, last step]: 64,000 samples seen at step 500.
        "metrics": {"samples": [64000.0, 128.0, 64000.0, 500.0], "loss": [0.5, 0.5, 2.0, 500.0]},
        "duration_seconds": 90.0,
    }
    fields.update(values)
    return RunSummary(**fields)


SMALL = measured_run(job=_finished(), summary=_summary())


def _planned(
    *, batch: str = GLOBAL_BATCH, steps: int = 20_000, left: str = "70", limit_minutes: int = 60
) -> Plan:
    """SMALL planned at 2 nodes x 4 GPUs with an efficiency of 0.8."""
    return run_plan(
        measured=SMALL,
        request=dataclasses.replace(_target(), time_limit=timedelta(minutes=limit_minutes)),
        steps=steps,
        batch=batch,
        efficiency=Efficiency(0.8, "given", ""),
        room=_room(left),
    )


def test_a_worked_example_checked_by_hand() -> None:
    # Measured: 2 GPUs, 1,000 samples/s (500 per GPU); 64,000 samples by step 500, so 128
    # samples a step, 128 / 1,000 = 0.128 s a step.
    assert (SMALL.gpus, SMALL.per_gpu, SMALL.units_per_step, SMALL.steps) == (2, 500, 128, 500)
    # Target: 2 nodes x 4 = 8 GPUs, 20,000 steps, global batch kept, efficiency 0.8:
    # 500 x 0.8 = 400 samples/s per GPU, 3,200 for the job; a step 128 / 3,200 = 0.04 s;
    # 20,000 x 0.04 = 800 s. GPU-hours 8 x 800 / 3,600 = 1.7778; CPU-hours (8 CPUs) the
    # same; cost 1.7778 x 2.50 + 1.7778 x 0.10 = 4.4445 + 0.1778 = 4.62. 70 GPU-h left,
    # 68.2222 after.
    plan = _planned()
    assert plan.throughput == pytest.approx(3200)
    assert plan.step_seconds == pytest.approx(0.04)
    assert plan.duration == timedelta(seconds=800)
    assert plan.estimate.gpu_hours == Decimal("1.7778")
    assert plan.estimate.cost == Decimal("4.62")
    assert plan.estimate.left_after == Decimal("68.2222")
    assert plan.fits and not plan.limit
    # The form's time limit (1 h) is longer than 800 s: nothing to warn of.
    assert plan.short_limit == ""

    # Each GPU's batch kept instead: a step does 4x the work at 0.8 of the pace,
    # 0.128 / 0.8 = 0.16 s; 20,000 x 0.16 = 3,200 s; 8 x 3,200 / 3,600 = 7.1111 GPU-h,
    # longer than a 30 min time limit.
    per_gpu = _planned(batch=PER_GPU_BATCH, limit_minutes=30)
    assert per_gpu.duration == timedelta(seconds=3200)
    assert per_gpu.estimate.gpu_hours == Decimal("7.1111")
    assert per_gpu.short_limit == (
        "The time limit entered (30 min) is shorter than the planned 53 min: "
        "the run would stop before step 20000."
    )


def test_over_budget_or_over_the_wall_time_says_so() -> None:
    # 7.1111 GPU-h against 5 left: the quota's own refusal.
    plan = _planned(batch=PER_GPU_BATCH, left="5")
    assert not plan.fits and plan.estimate.message.startswith("needs 7.11 GPU-h, 5 GPU-h left")
    # 0.16 s x 300,000 steps = 13.3 h, over the project's 12 h a job.
    long = _planned(batch=PER_GPU_BATCH, steps=300_000, left="1000", limit_minutes=900)
    assert not long.fits and "at most 12 h per job" in long.limit


def test_efficiency_measured_from_two_sizes_of_the_same_code() -> None:
    # 2 GPUs at 1,000 samples/s (500 each), 8 GPUs at 3,600 (450 each): 450 / 500 = 0.9.
    large = measured_run(job=_finished(pk=2, gpus=8), summary=_summary(throughput=3600.0))
    assert efficiency_measured(SMALL, large) == pytest.approx(0.9)
    assert efficiency_measured(large, SMALL) == pytest.approx(0.9)
    found = efficiency_for(measured=SMALL, gpus=16, given=None, other=large)
    assert (found.source, found.value) == ("measured", pytest.approx(0.9))
    assert "500 samples/s per GPU at 2 GPUs (job #1), 450 at 8 (job #2)" in found.note
    # Super-linear by noise is capped: a plan never promises more than the measured rate.
    fast = measured_run(job=_finished(pk=3, gpus=8), summary=_summary(throughput=4400.0))
    assert efficiency_for(measured=SMALL, gpus=8, given=None, other=fast).value == 1.0
    # The user's number wins; no more GPUs needs none.
    assert efficiency_for(measured=SMALL, gpus=8, given=0.7, other=large).value == 0.7
    assert efficiency_for(measured=SMALL, gpus=2, given=None, other=None).source == "same size"


@pytest.mark.parametrize(
    ("job", "summary", "words"),
    [
        (_finished(state=State.RUNNING), _summary(), r"has not finished \(Running\)"),
        (_finished(), None, "reported no throughput"),
        (_finished(), _summary(throughput=None), "reported no throughput"),
        (_finished(), _summary(throughput=0.0), "reported no throughput"),
    ],
)
def test_no_plan_without_a_measured_finished_run(
    job: Job, summary: RunSummary | None, words: str
) -> None:
    with pytest.raises(CannotPlan, match=words):
        measured_run(job=job, summary=summary)


def test_refusals_name_what_is_missing() -> None:
    with pytest.raises(CannotPlan, match="needs a scaling efficiency"):
        efficiency_for(measured=SMALL, gpus=8, given=None, other=None)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(CannotPlan, match="above 0 and at most 1"):
            efficiency_for(measured=SMALL, gpus=8, given=bad, other=None)
    tokens = measured_run(job=_finished(pk=4, gpus=8), summary=_summary(throughput_unit="tokens"))
    with pytest.raises(CannotPlan, match="different units"):
        efficiency_measured(SMALL, tokens)
    # A rate with no step numbers and no run time: the time a step takes is unknown.
    blind = measured_run(job=_finished(), summary=_summary(metrics={}, duration_seconds=None))
    with pytest.raises(CannotPlan, match="no step numbers"):
        blind.step_time()
    with pytest.raises(CannotPlan, match="number of steps"):
        target_steps(given=None, params={}, measured=blind)


def test_step_time_falls_back_to_the_run_time_over_the_steps() -> None:
    # No count or step rate: 90 s over 500 steps = 0.18 s a step, start-up included.
    coarse = measured_run(job=_finished(), summary=_summary(metrics={"loss": [1, 1, 2, 500]}))
    seconds, basis = coarse.step_time()
    assert seconds == pytest.approx(0.18) and "run time over its steps" in basis
    # A step rate gives the units per step: 1,000 samples/s over 4 steps/s = 250.
    rated = measured_run(job=_finished(), summary=_summary(metrics={"it_per_s": [4, 4, 4, 9]}))
    assert rated.units_per_step == 250


def test_steps_come_from_the_form_then_the_command_then_the_run() -> None:
    assert target_steps(given=900, params={"steps": 5}, measured=SMALL) == (
        900,
        "the last step entered",
    )
    assert target_steps(given=None, params={"max_steps": 5000}, measured=SMALL) == (
        5000,
        "the command's --max_steps",
    )
    assert target_steps(given=None, params={"steps": True}, measured=SMALL)[0] == 500


# --- the form's plan ------------------------------------------------------------------------


def _measured(
    project: Project, user: User, cluster: Cluster, *, gpus: int, rate: float, code: object
) -> Job:
    job, _ = factories.job(
        project, user, cluster, name=f"run-{gpus}", gpus_per_node=gpus, state=State.COMPLETED,
        code=code,
    )  # fmt: skip
    # 64 samples a step: 32,000 by step 500.
    RunSummary.objects.create(
        job=job,
        project=project,
        throughput=rate,
        throughput_unit="samples",
        metrics={"samples": [32000.0, 64.0, 32000.0, 500.0]},
    )
    return job


@pytest.fixture
def small(project: Project, member: User, cluster: Cluster, service_account: ClusterAccount) -> Job:
    cluster.price_per_gpu_hour = Decimal(3)
    cluster.save()
    snapshot = CodeSnapshot.objects.create(
        project=project, sha256="a" * 64, size=1, unpacked_size=1, files=1, created_by=member
    )
    return _measured(project, member, cluster, gpus=1, rate=250.0, code=snapshot)


def _plan(client: Client, cluster: Cluster, project: Project, job: Job, **more: object) -> dict:
    data = _form(cluster, project, nodes=2, gpus_per_node=2, total_steps="10000", **more)
    data["plan_from"] = job.pk
    response = client.post(reverse("job-preview"), data)
    assert response.status_code == 200
    return response.json()


def test_the_form_plans_the_bigger_run_beside_the_estimate(
    client: Client, member: User, project: Project, cluster: Cluster, small: Job
) -> None:
    client.force_login(member)
    page = client.get(reverse("job-new"), {"plan_from": small.pk}).content.decode()
    assert f'name="plan_from" value="{small.pk}"' in page and 'id="plan"' in page
    # 250 samples/s on 1 GPU, 64 a step. 4 GPUs at 0.8: 800 samples/s, 0.08 s a step,
    # 10,000 steps = 800 s; 4 x 800 / 3,600 = 0.89 GPU-h at 3 a GPU-hour = 2.67.
    data = _plan(client, cluster, project, small, plan_efficiency="0.8")
    plan = data["plan"]
    assert data["estimate"]["gpu_hours"] == "2.00"  # the form's own: 4 GPUs x 30 min
    assert plan["ok"] and plan["duration_seconds"] == 800 and plan["duration"] == "13 min"
    assert (plan["gpu_hours"], plan["cost"], plan["left_after"]) == ("0.89", "2.67", "99.11")
    assert plan["steps_from"] == "the last step entered" and plan["efficiency_source"] == "given"
    assert plan["fits"] and plan["short_limit"] == ""


def test_the_efficiency_is_measured_from_the_same_code_at_another_size(
    client: Client, member: User, project: Project, cluster: Cluster, small: Job,
    django_assert_num_queries,
) -> None:  # fmt: skip
    _measured(project, member, cluster, gpus=2, rate=450.0, code=small.code)
    client.force_login(member)
    assert _plan(client, cluster, project, small)["plan"]["ok"]  # warms the session
    # 450 / 2 = 225 per GPU against 250: 0.9. 900 samples/s on 4 GPUs, 64 / 900 s a
    # step, 10,000 steps = 711.1 s, rounded up to 712.
    # The form's preview: session, user, the form's projects, cluster, account, quota, the
    # usage's quota, charges and reservations, the room's quota and holdings, the other
    # clusters, their waits (13); the sizing's past runs of the command (1); the plan's: the
    # job, its summary, the same code's runs with their summaries (3). However many runs of
    # that code there are.
    with django_assert_num_queries(17):
        plan = _plan(client, cluster, project, small)["plan"]
    assert plan["efficiency"] == "0.90" and plan["efficiency_source"] == "measured"
    assert plan["duration_seconds"] == 712
    for rate in (400.0, 300.0):
        _measured(project, member, cluster, gpus=2, rate=rate, code=small.code)
    with django_assert_num_queries(17):
        plan = _plan(client, cluster, project, small)["plan"]
    assert plan["efficiency"] == "0.60"  # the newest at the nearest size: 300 / 2 / 250
    # Without another size, and without an efficiency, no number: what to do instead.
    Job.objects.exclude(pk=small.pk).delete()
    refused = _plan(client, cluster, project, small)["plan"]
    assert not refused["ok"] and "needs a scaling efficiency" in refused["message"]


def test_no_plan_from_a_run_without_throughput_or_not_finished(
    client: Client, member: User, project: Project, cluster: Cluster, small: Job
) -> None:
    client.force_login(member)
    Job.objects.filter(pk=small.pk).update(state=State.RUNNING)
    plan = _plan(client, cluster, project, small, plan_efficiency="0.8")["plan"]
    assert not plan["ok"] and "has not finished" in plan["message"]
    Job.objects.filter(pk=small.pk).update(state=State.COMPLETED)
    RunSummary.objects.filter(job=small).update(throughput=None)
    plan = _plan(client, cluster, project, small, plan_efficiency="0.8")["plan"]
    assert not plan["ok"] and "reported no throughput" in plan["message"]
    plan = _plan(client, cluster, project, small, plan_efficiency="lots")["plan"]
    assert plan == {"ok": False, "message": "Scaling efficiency: Enter a number."}


def test_outsiders_get_no_plan_and_the_job_page_links_it(
    client: Client, member: User, outsider: User, project: Project, cluster: Cluster, small: Job
) -> None:
    client.force_login(outsider)
    assert client.get(reverse("job-new"), {"plan_from": small.pk}).status_code == 404
    plan = _plan(client, cluster, project, small, plan_efficiency="0.8")["plan"]
    assert plan == {
        "ok": False,
        "message": "No such job to plan from, or not one of your projects'.",
    }
    client.force_login(member)
    html = client.get(reverse("job-page", args=[small.pk])).content.decode()
    assert f"{reverse('job-new')}?plan_from={small.pk}" in html
    Job.objects.filter(pk=small.pk).update(state=State.RUNNING)
    html = client.get(reverse("job-page", args=[small.pk])).content.decode()
    assert "Plan a bigger run" not in html
