"""The sweep pages and API: members see, the submitter and owners steer, outsiders are refused."""

import json
from decimal import Decimal

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Job
from projects.models import Project, Quota
from sweeps.models import Sweep, Trial
from sweeps.tick import sweep_advance
from tests.fixtures.jobs import Tokens
from tests.sweeps.helpers import falling, new_sweep, run

pytestmark = pytest.mark.usefixtures("no_submission")

FORM = {
    "name": "lr search",
    "partition": "gpu",
    "template": "command",
    "command": "python train.py --lr {lr}",
    "nodes": "1",
    "gpus_per_node": "1",
    "cpus_per_task": "1",
    "time_limit": "0:30:00",
    "space": '{"lr": {"type": "float", "low": 0.0001, "high": 0.1, "log": true}}',
    "first_trials": '[{"lr": 0.01, "nodes": 2}]',
    "sampler": "random",
    "seed": "0",
    "pruner": "median",
    "metric": "loss",
    "direction": "minimize",
    "report_every": "10",
    "warmup_steps": "10",
    "startup_trials": "2",
    "max_trials": "8",
    "max_concurrent": "2",
}

API_BODY = {
    "project": "vision",
    "cluster": "alps",
    "name": "api search",
    "command": "python train.py --lr {lr}",
    "partition": "gpu",
    "time_limit": "00:30:00",
    "space": {"lr": [0.1, 0.01, 0.001]},
    "sampler": "grid",
    "max_trials": 3,
}


@pytest.fixture
def sweep(submitter: User, project: Project, cluster: Cluster) -> Sweep:
    """A sweep with two complete trials (one on 2 nodes), one pruned and one running."""
    sweep = new_sweep(
        submitter, project, cluster, max_concurrent=3, first_trials=[{"lr": 0.01, "nodes": 2}]
    )
    assert sweep.pk is not None
    sweep_advance(sweep_id=sweep.pk)
    first, second, third = sweep.trials.order_by("number")
    run(first, falling(2.0, 0.01, 100), state=State.COMPLETED)
    run(second, falling(2.1, 0.01, 100), state=State.COMPLETED)
    run(third, {step: 3.0 for step in range(1, 15)})
    sweep_advance(sweep_id=sweep.pk)
    return sweep


def test_the_sweep_page_shows_the_best_trial_and_parallel_coordinates(
    client: Client, viewer: User, sweep: Sweep
) -> None:
    client.force_login(viewer)
    response = client.get(reverse("sweep-page", args=[sweep.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="sweep-parcoords"' in html and "vendor/plotly.min.js" in html
    best = sweep.trials.get(number=0)
    assert f"Trial 0: loss <strong>{best.value:.6g}</strong>" in html
    chart = json.loads(
        html.split('id="sweep-chart-data" type="application/json">')[1].split("<")[0]
    )
    assert chart["trials"] == [0, 1, 2] and chart["pruned"] == [False, False, True]
    assert [d["label"] for d in chart["dimensions"]] == ["log10(lr)", "nodes", "loss"]
    assert chart["dimensions"][1]["values"] == [2, 1, 1]
    assert chart["dimensions"][1]["tickvals"] == [1, 2]  # whole node counts, each once
    assert chart["color"][2] == 3.0  # pruned: its last report
    assert "sweep-pause" not in html  # a viewer cannot steer


def test_the_list_costs_the_same_queries_at_any_size(
    client: Client,
    member: User,
    submitter: User,
    project: Project,
    cluster: Cluster,
    sweep: Sweep,
    django_assert_num_queries,
) -> None:
    client.force_login(member)
    url = reverse("project-sweeps", args=["vision"])
    client.get(url)
    # session, user, project, may-submit membership, the sweeps with their counts.
    with django_assert_num_queries(5):
        assert "lr search" in client.get(url).content.decode()
    for _ in range(5):
        new_sweep(submitter, project, cluster)
    with django_assert_num_queries(5):
        assert client.get(url).content.decode().count("/sweeps/") >= 6


def test_the_submitter_pauses_and_stops_and_a_viewer_cannot(
    client: Client, submitter: User, viewer: User, sweep: Sweep
) -> None:
    client.force_login(viewer)
    client.post(reverse("sweep-action", args=[sweep.pk, "pause"]))
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.RUNNING
    client.force_login(submitter)
    assert "sweep-pause" in client.get(reverse("sweep-page", args=[sweep.pk])).content.decode()
    client.post(reverse("sweep-action", args=[sweep.pk, "pause"]))
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.PAUSED
    running = sweep.trials.filter(state=Trial.State.RUNNING).order_by("number")[0]
    client.post(reverse("sweep-trial-stop", args=[sweep.pk, running.number]))
    assert Trial.objects.get(pk=running.pk).state == Trial.State.STOPPED
    client.post(reverse("sweep-action", args=[sweep.pk, "stop"]))
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.STOPPED


def test_outsiders_are_refused_everywhere(
    client: Client, outsider: User, tokens: Tokens, sweep: Sweep
) -> None:
    client.force_login(outsider)
    pages: list[tuple[str, list[object]]] = [
        ("project-sweeps", ["vision"]),
        ("sweep-new", ["vision"]),
        ("sweep-page", [sweep.pk]),
    ]
    for name, args in pages:
        assert client.get(reverse(name, args=args)).status_code == 404
    buttons: list[tuple[str, list[object]]] = [
        ("sweep-action", [sweep.pk, "stop"]),
        ("sweep-trial-stop", [sweep.pk, 2]),
        ("sweep-new", ["vision"]),
    ]
    for name, args in buttons:
        assert client.post(reverse(name, args=args), FORM).status_code == 404
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.RUNNING
    assert Sweep.objects.count() == 1
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.outsider}")
    assert api.get(reverse("api-sweeps")).json()["results"] == []
    assert api.get(reverse("api-sweep", args=[sweep.pk])).status_code == 404
    made = api.post(
        reverse("api-sweeps"), {**FORM, "project": "vision", "cluster": "alps"}, "application/json"
    )
    assert made.status_code == 400 and Sweep.objects.count() == 1
    client.logout()
    assert client.get(reverse("sweep-page", args=[sweep.pk])).status_code == 302


def test_the_form_starts_a_sweep_and_refuses_one_over_the_budget(
    client: Client, submitter: User, cluster: Cluster, project: Project
) -> None:
    client.force_login(submitter)
    blank = client.get(reverse("sweep-new", args=["vision"])).content.decode()
    assert 'id="sweep-form"' in blank and f'<option value="{cluster.pk}">' in blank
    form = {**FORM, "cluster": str(cluster.pk)}
    response = client.post(reverse("sweep-new", args=["vision"]), form)
    sweep = Sweep.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/sweeps/{sweep.pk}/"
    assert sweep.first_trials == [{"lr": 0.01, "nodes": 2}] and sweep.max_trials == 8
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("4"))
    html = client.post(reverse("sweep-new", args=["vision"]), form).content.decode()
    assert "needs 4.5 GPU-h, 4 GPU-h left this month in project vision" in html
    assert Sweep.objects.count() == 1 and not Job.objects.exists()


def test_the_api_starts_and_reads_a_sweep(
    tokens: Tokens, submitter: User, cluster: Cluster
) -> None:
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.member}")
    made = api.post(reverse("api-sweeps"), API_BODY, "application/json")
    assert made.status_code == 201, made.json()
    sweep_id = made.json()["id"]
    sweep_advance(sweep_id=sweep_id)
    got = api.get(reverse("api-sweep", args=[sweep_id])).json()
    assert got["sampler"] == "grid" and len(got["trials"]) == 2
    assert {t["params"]["lr"] for t in got["trials"]} <= {0.1, 0.01, 0.001}
    assert api.get(reverse("api-sweeps")).json()["results"][0]["id"] == sweep_id


def test_a_sweep_never_runs_its_trials_as_jupyterlab_sessions(
    client: Client, tokens: Tokens, submitter: User, cluster: Cluster
) -> None:
    """A session waits for a person: its trials would never report their metric."""
    client.force_login(submitter)
    blank = client.get(reverse("sweep-new", args=["vision"])).content.decode()
    assert 'value="torchrun"' in blank and 'value="jupyter"' not in blank
    form = {**FORM, "cluster": str(cluster.pk), "template": "jupyter"}
    html = client.post(reverse("sweep-new", args=["vision"]), form).content.decode()
    assert "Select a valid choice" in html and not Sweep.objects.exists()
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.member}")
    refused = api.post(
        reverse("api-sweeps"), {**API_BODY, "template": "jupyter"}, "application/json"
    )
    assert refused.status_code == 400 and "template" in refused.json()
    assert not Sweep.objects.exists()


def test_compare_opens_the_trials_runs_best_first(
    client: Client, member: User, sweep: Sweep
) -> None:
    client.force_login(member)
    page = client.get(reverse("sweep-page", args=[sweep.pk])).content.decode()
    trials = {t.number: t for t in sweep.trials.all()}
    assert [trials[n].state for n in sorted(trials)] == [
        Trial.State.COMPLETE,  # 1.0
        Trial.State.COMPLETE,  # 1.1
        Trial.State.PRUNED,  # 3.0 at its last report
        *[Trial.State.RUNNING] * 3,
    ]
    # Scored trials best first, then the running ones, newest first.
    order = [trials[n].job_id for n in (0, 1, 2, 5, 4, 3)]
    runs = "%2C".join(str(job_id) for job_id in order)
    url = f"/projects/vision/compare/?runs={runs}&metric=loss"
    assert f'id="sweep-compare" href="{url.replace("&", "&amp;")}"' in page
    compare = client.get(url).content.decode()
    assert all(f"/jobs/{job_id}/" in compare for job_id in order)
