"""The runs table: summaries the poll keeps, sort and filter by any column, and who may see it."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster
from jobs.enums import State
from jobs.models import Attempt, Job
from jobs.params import SOURCE_LOGGED, params_for_spec
from jobs.services import job_params_log
from monitoring.ingest.worker import parse_request
from monitoring.models import EfficiencyCard, RunSummary
from monitoring.runs.summary import run_summary_finish, runs_record
from monitoring.runs.table import RunsQueryError, parse_filter
from monitoring.series.write import series_append
from projects.models import Project
from tests import factories


def _run(
    project: Project, user: User, cluster: Cluster, name: str, command: str, losses: list[float]
) -> tuple[Job, Attempt]:
    params, sources = params_for_spec(command=command, given={})
    job, attempt = factories.job(
        project, user, cluster, name=name, command=command, params=params, param_sources=sources
    )
    points = [(attempt.pk, "loss", float(step), loss) for step, loss in enumerate(losses, 1)]
    points += [(attempt.pk, "eval_loss", 10.0, min(losses) + 0.1)]
    points += [(attempt.pk, "samples_per_sec", float(len(losses)), 1000.0)]
    series_append(points=points)
    runs_record(attempts={attempt.pk: attempt}, points=points, params={})
    return job, attempt


@pytest.fixture
def runs(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    made = []
    for i, lr in enumerate(("0.1", "0.01", "0.001")):
        job, _ = _run(
            project,
            owner,
            cluster,
            f"sweep-{i}",
            f"python train.py --lr {lr} --seed {i}",
            [2.0, 1.0 + i * 0.1, 1.5 - i * 0.4],
        )
        made.append(job)
    return made


def test_the_poll_keeps_each_runs_summary(runs: list[Job]) -> None:
    summary = RunSummary.objects.get(job=runs[2])
    assert summary.loss_last == pytest.approx(0.7)
    assert summary.loss_best == pytest.approx(0.7)
    assert summary.eval_name == "eval_loss" and summary.eval_best == pytest.approx(0.8)
    assert summary.throughput == 1000.0 and summary.throughput_unit == "samples"
    assert summary.metrics["loss"][:3] == [pytest.approx(0.7), pytest.approx(0.7), 2.0]


def test_gpu_hours_and_duration_when_an_attempt_ends(runs: list[Job]) -> None:
    attempt = runs[0].attempts.get()
    now = timezone.now()
    attempt.started_at, attempt.ended_at = now - timedelta(hours=2), now
    attempt.save()
    EfficiencyCard.objects.create(attempt=attempt, data={}, gpu_hours=4.0)
    run_summary_finish(attempt=attempt)
    summary = RunSummary.objects.get(job=runs[0])
    assert summary.gpu_hours == 4.0 and summary.duration_seconds == pytest.approx(7200)


def test_logged_settings_are_read_capped_and_laid_over_the_table(runs: list[Job]) -> None:
    many = {f"k{i}": i for i in range(500)}
    lines = [
        json.dumps({"params": {"lr": 0.05, "optimizer": "adamw"}, "time": 1.0}),
        json.dumps({"step": 1, "loss": 0.5}),
        json.dumps({"params": many}),
    ]
    reply = parse_request({"kind": "jsonl", "lines": lines})
    assert reply["bad"] == 0 and len(reply["points"]) == 1
    assert len(reply["params"]) == 100  # jobs.params.MAX_PARAMS
    job_params_log(job_id=runs[0].pk, logged={"lr": 0.05, "optimizer": "adamw"})
    runs[0].refresh_from_db()
    assert runs[0].params["lr"] == 0.05 and runs[0].params["seed"] == 0
    assert runs[0].param_sources["lr"] == SOURCE_LOGGED


def _table(client: Client, **query: str | list[str]) -> str:
    response = client.get(reverse("project-runs", args=["vision"]), query)
    assert response.status_code == 200
    return response.content.decode()


def _order(html: str, jobs: list[Job]) -> list[str]:
    found = sorted(
        (html.index(f">{job.name}<"), job.name) for job in jobs if f">{job.name}<" in html
    )
    return [name for _, name in found]


def test_sort_and_filter_by_summary_and_parameter_columns(
    client: Client, member: User, runs: list[Job]
) -> None:
    client.force_login(member)
    assert _order(_table(client, sort="loss_best"), runs) == ["sweep-2", "sweep-0", "sweep-1"]
    assert _order(_table(client, sort="-p.lr"), runs) == ["sweep-0", "sweep-1", "sweep-2"]
    assert _order(_table(client, f="p.lr=0.01"), runs) == ["sweep-1"]
    assert _order(_table(client, f=["p.lr<0.05", "loss_best<1"]), runs) == ["sweep-2"]
    assert _order(_table(client, f="name~SWEEP-0"), runs) == ["sweep-0"]
    assert _order(_table(client, f="state!=QUEUED"), runs) == []
    html = _table(client, cols="name,p.seed,gpu_hours")
    assert 'data-col="p.seed"' in html and 'data-col="loss_best"' not in html
    assert "Cannot read the filter" in _table(client, f="lr<<1")
    # A value the column cannot compare with is the form's message, not a server error.
    assert "is not a number" in _table(client, f="loss_best<abc")
    assert "Compare created with a date" in _table(client, f="created<2026-02-30")
    assert "page number up to" in _table(client, page="9" * 30)  # past any SQL offset


def test_filters_say_what_to_write() -> None:
    assert parse_filter("p.lr>=1e-3").op == ">="
    with pytest.raises(RunsQueryError):
        parse_filter("nonsense")


def test_the_page_costs_the_same_queries_at_any_size(
    client: Client,
    member: User,
    project: Project,
    owner: User,
    cluster: Cluster,
    runs: list[Job],
    django_assert_num_queries,
) -> None:
    client.force_login(member)
    _table(client)  # warm the session
    full_page = {"sort": "-loss_best", "f": "p.lr<1", "size": "2"}
    # session, user, project (visible to the member), the settings' keys of the newest
    # runs, the capped count, the page's ids, its rows with summaries and users.
    with django_assert_num_queries(7):
        _table(client, **full_page)
    for i in range(20):
        _run(project, owner, cluster, f"more-{i}", f"t.py --lr {i}", [1.0, 0.5])
    with django_assert_num_queries(7):
        _table(client, **full_page)
    # A page that reaches the runs with no loss yet reads them too: one query more.
    factories.job(project, owner, cluster, name="no-loss-yet")
    with django_assert_num_queries(8):
        html = _table(client, sort="-loss_best")
    assert html.index("more-0") < html.index("no-loss-yet")


def test_outsiders_are_refused_and_staff_see_it(
    client: Client, outsider: User, staff: User, runs: list[Job]
) -> None:
    for name in ("project-runs", "project-compare", "project-compare-curves"):
        client.force_login(outsider)
        assert client.get(reverse(name, args=["vision"]), {"runs": runs[0].pk}).status_code == 404
        client.force_login(staff)
        assert client.get(reverse(name, args=["vision"]), {"runs": runs[0].pk}).status_code == 200
    client.logout()
    assert client.get(reverse("project-runs", args=["vision"])).status_code == 302


def test_the_project_page_links_the_runs_table(
    client: Client, member: User, project: Project
) -> None:
    client.force_login(member)
    html = client.get(reverse("project-page", args=["vision"])).content.decode()
    assert reverse("project-runs", args=["vision"]) in html


def test_the_job_page_shows_the_settings(client: Client, owner: User, runs: list[Job]) -> None:
    client.force_login(owner)
    html = client.get(reverse("job-page", args=[runs[1].pk])).content.decode()
    assert 'id="job-params"' in html and "<code>lr</code>" in html and "0.01" in html


def test_states_are_real(runs: list[Job]) -> None:
    Job.objects.filter(pk=runs[0].pk).update(state=State.COMPLETED)
    assert Job.objects.filter(state=State.COMPLETED).count() == 1


def test_pages_run_on_from_the_valued_runs_into_the_blank_ones(
    client: Client, member: User, project: Project, owner: User, cluster: Cluster, runs: list[Job]
) -> None:
    for name in ("blank-a", "blank-b"):
        factories.job(project, owner, cluster, name=name)
    client.force_login(member)
    everyone = [*runs, *Job.objects.filter(name__startswith="blank-")]
    pages = [
        _order(_table(client, sort="loss_best", size="2", page=str(n)), everyone) for n in (1, 2, 3)
    ]
    assert pages == [["sweep-2", "sweep-0"], ["sweep-1", "blank-b"], ["blank-a"]]
