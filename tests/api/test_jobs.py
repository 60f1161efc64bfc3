"""Jobs, projects and attempt data over REST: behaviour, errors, pagination, query counts."""

import json
from decimal import Decimal

import pytest
from django.core.cache import cache
from django.test import Client
from django.utils import timezone

from clusters.status import ClusterStatus, PartitionStatus
from jobs.enums import State
from jobs.models import Attempt, Job, JobEvent
from jobs.rundir import PREFLIGHT_SCRIPT
from jobs.scripts import RunDir, render_batch_script
from projects.models import Quota
from tests import factories
from tests.helpers import Tokens, bearer

SPEC = {
    "project": "vision",
    "cluster": "alps",
    "name": "api-job",
    "command": "python train.py --lr 0.1",
    "partition": "gpu",
    "cpus_per_task": 1,
    "time_limit": "00:30:00",
    "total_steps": 100,
}

# Every submitter here submits through the shared service account.
pytestmark = pytest.mark.usefixtures("service_account")


def _post(client: Client, path: str, body: dict[str, object]):
    return client.post(path, json.dumps(body), content_type="application/json")


# --- submit ---------------------------------------------------------------------------


def test_submit_records_the_job_and_its_first_attempt(cluster, member, tokens: Tokens) -> None:
    response = _post(bearer(tokens.member), "/api/v1/jobs/", SPEC)
    assert response.status_code == 201, response.content
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert (job.user, job.state, job.total_steps) == (member, State.QUEUED, 100)
    assert body["project"] == "vision" and body["cluster"] == "alps" and body["user"] == "mia"
    assert body["time_limit"] == "00:30:00" and body["latest_attempt"] == 1
    assert Attempt.objects.filter(job=job, number=1).exists()
    assert JobEvent.objects.filter(job=job, to_state=State.QUEUED).exists()


@pytest.mark.parametrize(
    ("change", "field", "says"),
    [
        # The project's quota allows 4 GPUs per job and 12 h.
        ({"gpus_per_node": 2, "nodes": 3}, "nodes", "at most 2"),
        ({"gpus_per_node": 8}, "gpus_per_node", "at most"),
        ({"time_limit": "13:00:00"}, "time_limit", "12 h"),
        ({"partition": "cpu"}, "partition", "choose one of gpu"),
        ({"template": "slurm"}, "template", "valid choice"),
        ({"time_limit": "soon"}, "time_limit", "format"),
        ({"metric_patterns": "acc=([0-9.]+"}, "metric_patterns", ""),
        ({"cluster": "nowhere"}, "cluster", "/api/v1/clusters/"),
        ({"project": "speech"}, "project", "among yours"),
        ({"name": ""}, "name", ""),
    ],
)
def test_bad_submissions_are_400_naming_the_field(
    cluster, member, tokens: Tokens, change, field, says
) -> None:
    response = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, **change})
    assert response.status_code == 400
    errors = response.json()
    assert field in errors, errors
    assert says in " ".join(errors[field])
    assert not Job.objects.exists()


def test_a_budget_refusal_says_why_and_creates_nothing(cluster, member, tokens: Tokens) -> None:
    Quota.objects.filter(project__slug="vision").update(gpu_hours_per_period=Decimal("0.1"))
    response = _post(bearer(tokens.member), "/api/v1/jobs/", SPEC)
    assert response.status_code == 400
    assert response.json()["non_field_errors"][0]
    assert not Job.objects.exists()


def test_a_viewer_is_told_to_ask_an_owner(cluster, viewer, tokens: Tokens) -> None:
    response = _post(bearer(tokens.viewer), "/api/v1/jobs/", SPEC)
    assert response.status_code == 403
    assert "ask one of its owners" in response.json()["detail"]


def test_a_read_token_cannot_submit(cluster, owner, tokens: Tokens) -> None:
    response = _post(bearer(tokens.owner_read), "/api/v1/jobs/", SPEC)
    assert response.status_code == 403
    assert "submit scope" in response.json()["detail"]
    assert not Job.objects.exists()


# --- clone and cancel ------------------------------------------------------------------------


def test_clone_copies_the_spec_with_changes(job: Job, member, tokens: Tokens) -> None:
    response = _post(bearer(tokens.member), f"/api/v1/jobs/{job.pk}/clone/", {"nodes": 2})
    assert response.status_code == 201, response.content
    clone = Job.objects.get(pk=response.json()["id"])
    assert clone.pk != job.pk and clone.user == member
    assert (clone.name, clone.command, clone.nodes) == (job.name, job.command, 2)


def test_clone_refuses_what_the_quota_refuses(job: Job, tokens: Tokens) -> None:
    response = _post(bearer(tokens.owner), f"/api/v1/jobs/{job.pk}/clone/", {"gpus_per_node": 9})
    assert response.status_code == 400
    assert "gpus_per_node" in response.json()
    assert Job.objects.count() == 1


def test_cancel_before_submission_ends_the_job(job: Job, tokens: Tokens) -> None:
    response = _post(bearer(tokens.owner), f"/api/v1/jobs/{job.pk}/cancel/", {})
    assert response.status_code == 202
    assert response.json()["state"] == State.CANCELLED
    assert Attempt.objects.get(job=job).state == State.CANCELLED
    # Nothing ran, so nothing is left to read: the job is finished for a client.
    assert response.json()["output_complete"] is True


def test_an_ended_job_shows_whether_its_output_is_all_read(job: Job, tokens: Tokens) -> None:
    Attempt.objects.filter(job=job).update(state=State.COMPLETED, slurm_job_id="7")
    Job.objects.filter(pk=job.pk).update(state=State.COMPLETED)
    client = bearer(tokens.owner)

    def shown() -> list[bool]:
        listed = client.get("/api/v1/jobs/").json()["results"]
        return [client.get(f"/api/v1/jobs/{job.pk}/").json()["output_complete"]] + [
            row["output_complete"] for row in listed if row["id"] == job.pk
        ]

    assert shown() == [False, False]  # the last polls are still reading what it wrote
    Attempt.objects.filter(job=job).update(files_complete=True)
    assert shown() == [True, True]


def test_a_member_cannot_cancel_anothers_job(job: Job, tokens: Tokens) -> None:
    response = _post(bearer(tokens.member), f"/api/v1/jobs/{job.pk}/cancel/", {})
    assert response.status_code == 403
    assert "submitter or a project owner" in response.json()["detail"]
    assert Attempt.objects.get(job=job).state == State.QUEUED


# --- lists ----------------------------------------------------------------------------------------


def test_jobs_come_a_cursor_page_at_a_time_newest_first(
    project, owner, cluster, tokens: Tokens
) -> None:
    made = [factories.job(project, owner, cluster, name=f"j{i}")[0].pk for i in range(5)]
    client = bearer(tokens.owner)
    seen, url = [], "/api/v1/jobs/?page_size=2"
    while url:
        page = client.get(url).json()
        assert set(page) == {"next", "previous", "results"}  # no count
        seen += [row["id"] for row in page["results"]]
        url = page["next"]
    assert seen == sorted(made, reverse=True)


def test_job_filters(project, owner, member, cluster, other_job, tokens: Tokens) -> None:
    mine, _ = factories.job(project, member, cluster, name="mine")
    theirs, _ = factories.job(project, owner, cluster, name="theirs", state=State.RUNNING)
    client = bearer(tokens.member)

    def ids(**params: str) -> set[int]:
        response = client.get("/api/v1/jobs/", params)
        assert response.status_code == 200, response.content
        return {row["id"] for row in response.json()["results"]}

    assert ids() == {mine.pk, theirs.pk}
    assert ids(mine="true") == {mine.pk}
    assert ids(state="RUNNING") == {theirs.pk}
    assert ids(project="speech") == set()  # not one of theirs: simply nothing
    assert ids(cluster="alps", project="vision") == {mine.pk, theirs.pk}
    assert client.get("/api/v1/jobs/", {"state": "DONE"}).status_code == 400


def test_job_list_query_count_does_not_grow(
    project, owner, cluster, client: Client, django_assert_num_queries
) -> None:
    for i in range(6):
        factories.job(project, owner, cluster, name=f"j{i}")
    client.force_login(owner)
    # session, user, one page of jobs with project, cluster, user and latest attempt
    with django_assert_num_queries(3):
        assert len(client.get("/api/v1/jobs/").json()["results"]) == 6


def test_projects_with_usage_and_role(job, owner, other_job, tokens: Tokens) -> None:
    rows = bearer(tokens.owner).get("/api/v1/projects/").json()
    assert [row["slug"] for row in rows] == ["vision"]
    assert rows[0]["role"] == "owner"
    usage = rows[0]["usage"]
    assert usage["budget_gpu_hours"] == 100.0 and usage["has_quota"] is True
    assert usage["left_gpu_hours"] <= usage["budget_gpu_hours"]
    assert bearer(tokens.owner).get("/api/v1/projects/speech/").status_code == 404


def test_project_list_query_count_is_fixed(
    project, owner, client: Client, django_assert_max_num_queries
) -> None:
    client.force_login(owner)
    # session, user, memberships with project and quota, then the usage selector's own
    # fixed set (charges and reservations summed per project), code snapshots kept
    with django_assert_max_num_queries(7):
        client.get("/api/v1/projects/")


# --- attempts, events and data ----------------------------------------------------------------


def test_attempts_and_events(job: Job, tokens: Tokens) -> None:
    client = bearer(tokens.viewer)
    attempts = client.get(f"/api/v1/jobs/{job.pk}/attempts/").json()
    assert [a["number"] for a in attempts] == [1] and attempts[0]["state"] == State.QUEUED
    _post(bearer(tokens.owner), f"/api/v1/jobs/{job.pk}/cancel/", {})
    events = client.get(f"/api/v1/jobs/{job.pk}/events/").json()
    assert events[-1]["to_state"] == State.CANCELLED and events[-1]["attempt"] == 1
    assert "Cancelled by olivia" in events[-1]["reason"]


def test_log_last_lines(job: Job, tokens: Tokens) -> None:
    body = bearer(tokens.viewer).get(f"/api/v1/jobs/{job.pk}/attempts/1/log", {"lines": 2}).json()
    assert body["text"] == "step 2 loss 0.7\nstep 3 loss 0.5\n"
    assert body["end"] == body["size"]


def test_series_as_csv(job: Job, tokens: Tokens) -> None:
    response = bearer(tokens.viewer).get(
        f"/api/v1/jobs/{job.pk}/attempts/1/series/loss", {"format": "csv"}
    )
    assert response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0] == "x,loss" and lines[1] == "1.0,1.0" and len(lines) == 6


def test_gpu_samples_by_gpu_and_metric(job: Job, tokens: Tokens) -> None:
    body = bearer(tokens.viewer).get(f"/api/v1/jobs/{job.pk}/attempts/1/gpus").json()
    assert len(body["gpus"]) == 1
    gpu = body["gpus"][0]
    assert (gpu["node"], gpu["index"]) == ("n1", 0)
    assert gpu["metrics"]["utilization"]["y"] == [90.0, 91.0, 92.0]


def test_submit_with_a_restart_policy(cluster, member, tokens: Tokens) -> None:
    policy = {"max_restarts": 2, "restart_on": ["node_failure"], "exclude_failed_nodes": True}
    response = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, **policy, "preflight": True})
    assert response.status_code == 201, response.content
    assert response.json()["preflight"] is True
    job = Job.objects.get(pk=response.json()["id"])
    assert (job.max_restarts, job.restart_on, job.exclude_failed_nodes, job.preflight) == (
        2,
        ["node_failure"],
        True,
        True,
    )
    refused = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, "restart_on": ["cuda_oom"]})
    assert refused.status_code == 400 and "restart_on" in refused.json()
    # A preflight that finds a faulty node resubmits without it by itself: not a reason to pick.
    refused = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, "restart_on": ["preflight"]})
    assert refused.status_code == 400
    assert "not a restart reason" in " ".join(refused.json()["restart_on"])


def test_attempt_and_event_lists_take_fixed_queries(
    job: Job, owner, client: Client, django_assert_num_queries
) -> None:
    client.force_login(owner)
    for number in (2, 3, 4):
        attempt = Attempt.objects.create(job=job, number=number)
        JobEvent.objects.create(
            job=job, attempt=attempt, time=timezone.now(), to_state=State.QUEUED, reason="restart"
        )
    # session, user, the job (membership checked in the same query), its latest attempt
    # number, then the attempts (or the events with their attempts)
    with django_assert_num_queries(5):
        client.get(f"/api/v1/jobs/{job.pk}/attempts/")
    with django_assert_num_queries(5):
        client.get(f"/api/v1/jobs/{job.pk}/events/")


def test_clusters_show_partitions_and_free_gpus(cluster, owner, tokens: Tokens) -> None:
    # The status as the dashboard's cached read left it a moment ago.
    status = ClusterStatus(
        cluster="alps",
        read_at=timezone.now(),
        partitions=[
            PartitionStatus("gpu", True, "up", "24 h", 2, 4, 1, 3),
            PartitionStatus("big", False, "up", "2 days", 1, 8, 8, 0),
        ],
    )
    cache.set(f"clusters:status:{cluster.pk}", status, 60)
    [row] = bearer(tokens.owner).get("/api/v1/clusters/").json()
    assert (row["name"], row["gpus_total"], row["gpus_free"], row["error"]) == ("alps", 12, 3, "")
    assert [p["name"] for p in row["partitions"]] == ["gpu", "big"]
    assert row["partitions"][0]["gpus_free"] == 3


def test_the_browsable_api_renders_for_the_browser(job: Job, owner, client: Client) -> None:
    client.force_login(owner)
    for path in (
        "/api/v1/projects/",
        "/api/v1/clusters/",
        "/api/v1/jobs/",
        f"/api/v1/jobs/{job.pk}/",
        f"/api/v1/jobs/{job.pk}/attempts/",
        f"/api/v1/jobs/{job.pk}/events/",
        f"/api/v1/jobs/{job.pk}/attempts/1/log",
        f"/api/v1/jobs/{job.pk}/attempts/1/series",
        f"/api/v1/jobs/{job.pk}/attempts/1/series/loss",
        f"/api/v1/jobs/{job.pk}/attempts/1/gpus",
    ):
        response = client.get(path, headers={"Accept": "text/html"})
        assert response.status_code == 200, path
        assert response["Content-Type"].startswith("text/html"), path


def test_submit_with_settings_and_the_commands_flags(cluster, member, tokens: Tokens) -> None:
    spec = {**SPEC, "command": "python train.py --lr 0.1 --fp16", "params": {"seed": 3}}
    response = _post(bearer(tokens.member), "/api/v1/jobs/", spec)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["params"] == {"lr": 0.1, "fp16": True, "seed": 3}
    assert body["param_sources"] == {"lr": "command", "fp16": "command", "seed": "given"}
    refused = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, "params": {"a b": 1}})
    assert refused.status_code == 400 and "params" in refused.json()


def test_a_project_may_ask_a_preflight_of_every_multi_node_job(
    cluster, member, project, tokens: Tokens
) -> None:
    """Project.preflight_multi_node: a job of two nodes gets one without asking; one of a
    single node does not (a one-node job meets a bad node through the ledger)."""
    project.preflight_multi_node = True
    project.save(update_fields=["preflight_multi_node"])
    two = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, "nodes": 2, "name": "two"})
    one = _post(bearer(tokens.member), "/api/v1/jobs/", {**SPEC, "nodes": 1, "name": "one"})
    assert (two.status_code, one.status_code) == (201, 201), (two.content, one.content)
    assert (two.json()["preflight"], one.json()["preflight"]) == (True, False)
    job = Job.objects.get(pk=two.json()["id"])
    script = render_batch_script(
        job=job, attempt=job.attempts.get(), run_dir=RunDir("/home/mia/portal-runs/r")
    )
    assert PREFLIGHT_SCRIPT in script
