"""/metrics: who may scrape it, what it serves of running jobs and of the portal itself,
and that a scrape costs a bounded number of queries whatever the number of jobs."""

from datetime import UTC, datetime

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from accounts.services import token_issue
from clusters import status as cluster_status_module
from clusters.models import Cluster
from clusters.slurm.scontrol import Node
from clusters.status import ClusterStatus, cluster_status
from jobs.enums import State
from jobs.models import Attempt
from jobs.poll.cycle import PollResult
from jobs.poll.health import poll_record
from monitoring.ingest.figures import ingest_record
from monitoring.live.slots import slot_give_back, slot_take
from monitoring.prometheus import health as metrics_health
from monitoring.series.overwrite import series_delete
from monitoring.series.write import series_append
from portal_lib.health import HEALTH_KEY, health_redis
from projects.models import Project
from tests import factories
from tests.helpers import METRICS_TOKEN, bearer, metric_samples

Samples = list[tuple[str, dict[str, str], float]]
# What a scrape asks the database, whatever the number of jobs: the running attempts
# (with job, user, project, cluster), the live attempts by cluster and state, the clusters,
# the running attempts' GPU and MFU series, their progress rows.
SCRAPE_QUERIES = 5


@pytest.fixture(autouse=True)
def metrics_token(settings) -> None:
    settings.PORTAL_METRICS_TOKEN = METRICS_TOKEN
    health_redis().delete(HEALTH_KEY)


def scrape() -> Samples:
    response = bearer(METRICS_TOKEN).get("/metrics")
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    return metric_samples(response.content.decode())


def values(samples: Samples, name: str, **labels: str) -> list[float]:
    return [
        value
        for sample, found, value in samples
        if sample == name and all(found.get(k) == v for k, v in labels.items())
    ]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401),
        ({"Authorization": "Bearer "}, 401),
        ({"Authorization": "Bearer wrong-token"}, 403),
        ({"Authorization": f"Bearer {METRICS_TOKEN}x"}, 403),
    ],
)
def test_a_scrape_without_the_metrics_token_is_refused(
    headers: dict[str, str], status: int
) -> None:
    response = Client(headers=headers).get("/metrics")
    assert response.status_code == status
    assert b"portal_" not in response.content
    if status == 401:
        assert response["WWW-Authenticate"] == 'Bearer realm="metrics"'


@pytest.mark.django_db
def test_staff_session_and_personal_tokens_do_not_open_metrics(staff: User) -> None:
    personal = token_issue(user=staff, name="laptop", scope="submit").text
    assert bearer(personal).get("/metrics").status_code == 403
    browser = Client()
    browser.force_login(staff)
    assert browser.get("/metrics").status_code == 401


@pytest.mark.django_db
def test_no_token_configured_means_the_endpoint_is_off(settings) -> None:
    settings.PORTAL_METRICS_TOKEN = ""
    response = bearer("").get("/metrics")
    assert response.status_code == 403
    assert b"PORTAL_METRICS_TOKEN" in response.content
    assert bearer("anything").get("/metrics").status_code == 403


@pytest.mark.django_db
def test_a_running_job_is_served_with_its_labels_in_base_units(
    project: Project, owner: User, cluster: Cluster
) -> None:
    attempt = factories.running_attempt(project, owner, cluster)
    samples = scrape()
    job = {"job": str(attempt.job_id), "attempt": "1", "user": owner.username}
    job |= {"project": project.slug, "cluster": cluster.name}
    gpu0 = job | {"node": "n1", "gpu": "0"}
    assert values(samples, "portal_job_gpu_utilization_ratio", **gpu0) == [0.87]
    assert values(samples, "portal_job_gpu_utilization_ratio", gpu="1") == [0.12]
    assert values(samples, "portal_job_gpu_memory_used_bytes", **gpu0) == [1024.0 * 1024 * 1024]
    assert values(samples, "portal_job_gpu_power_watts", **gpu0) == [310.5]
    assert values(samples, "portal_job_gpus", **job) == [2.0]
    assert values(samples, "portal_job_step", **job) == [40.0]
    assert values(samples, "portal_job_steps_per_second", **job) == [0.5]
    assert values(samples, "portal_job_mfu_ratio", **job) == [0.41]
    assert values(samples, "portal_job_mfu_printed", **job) == []
    assert values(samples, "portal_job_hung", **job) == [0.0]
    # A training series that is not one of the exported kinds stays in the portal.
    assert not [s for s in samples if "loss" in s[0]]


@pytest.mark.django_db
def test_a_printed_mfu_is_not_served_as_a_ratio(
    project: Project, owner: User, cluster: Cluster
) -> None:
    attempt = factories.running_attempt(project, owner, cluster)
    # What monitoring.reading.throughput does once a trainer prints its own: no computed MFU.
    series_delete(attempt_id=attempt.pk, names=["mfu_computed"])
    series_append(points=[(attempt.pk, "mfu", 40.0, 12.5)])
    samples = scrape()
    assert values(samples, "portal_job_mfu_ratio") == []
    assert values(samples, "portal_job_mfu_printed", job=str(attempt.job_id)) == [12.5]


@pytest.mark.django_db
def test_the_series_of_a_job_that_ended_disappear(
    project: Project, owner: User, cluster: Cluster
) -> None:
    attempt = factories.running_attempt(project, owner, cluster)
    assert values(scrape(), "portal_job_gpu_utilization_ratio", job=str(attempt.job_id))
    Attempt.objects.filter(pk=attempt.pk).update(state=State.COMPLETED, ended_at=timezone.now())
    samples = scrape()
    assert not [s for s in samples if s[1].get("job") == str(attempt.job_id)]
    assert not [s for s in samples if s[0].startswith("portal_job_")]


@pytest.mark.django_db
def test_a_gpu_whose_sampler_stopped_is_not_served_as_now(
    project: Project, owner: User, cluster: Cluster, settings
) -> None:
    attempt = factories.running_attempt(project, owner, cluster, node="n2")
    long_ago = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
    series_append(points=[(attempt.pk, "gpu/n2/3/utilization", long_ago, 99.0)])
    samples = scrape()
    assert values(samples, "portal_job_gpu_utilization_ratio", gpu="3") == []
    assert values(samples, "portal_job_gpu_utilization_ratio", gpu="0") == [0.87]


@pytest.mark.django_db
def test_per_job_series_are_capped_oldest_first_and_the_rest_counted(
    project: Project, owner: User, cluster: Cluster, settings
) -> None:
    settings.METRICS_MAX_JOBS = 2
    attempts = [factories.running_attempt(project, owner, cluster) for _ in range(3)]
    Attempt.objects.filter(pk=attempts[0].pk).update(started_at=timezone.now())
    samples = scrape()
    served = {labels["job"] for name, labels, _ in samples if name == "portal_job_gpus"}
    assert served == {str(attempts[1].job_id), str(attempts[2].job_id)}
    assert values(samples, "portal_metrics_jobs_omitted") == [1.0]
    assert values(samples, "portal_cluster_running_jobs", cluster=cluster.name) == [3.0]
    assert values(samples, "portal_cluster_running_gpus", cluster=cluster.name) == [6.0]


@pytest.mark.django_db
@pytest.mark.parametrize("jobs", [1, 12])
def test_a_scrape_costs_the_same_queries_whatever_the_number_of_jobs(
    project: Project, owner: User, cluster: Cluster, jobs: int, django_assert_num_queries
) -> None:
    for _ in range(jobs):
        factories.running_attempt(project, owner, cluster)
    pending, _ = factories.job(project, owner, cluster, gpus_per_node=4)
    Attempt.objects.filter(job=pending).update(state=State.PENDING)
    with django_assert_num_queries(SCRAPE_QUERIES):
        samples = scrape()
    assert len(values(samples, "portal_job_gpus")) == jobs
    assert values(samples, "portal_cluster_pending_jobs", cluster=cluster.name) == [1.0]
    assert values(samples, "portal_cluster_pending_gpus", cluster=cluster.name) == [4.0]


@pytest.mark.django_db
def test_poll_ingest_and_stream_figures_are_served(
    project: Project, owner: User, cluster: Cluster
) -> None:
    factories.running_attempt(project, owner, cluster)
    poll_record(cluster_id=cluster.pk, seconds=0.25, result=PollResult(unreachable=["alice"]))
    poll_record(cluster_id=cluster.pk, seconds=0.75, result=None)
    poll_record(cluster_id=cluster.pk, seconds=0.125, result=PollResult(), part="files")
    ingest_record(points=[(1, "loss", 1.0, 0.5), (1, "gpu/n1/0/power", 1.0, 300.0)], stored=[])
    # Other tests' streams on this Redis database lapse on their own: count from theirs.
    [before] = values(scrape(), "portal_live_streams", kind="sse")
    slot = slot_take(kind="sse", user_id=owner.pk, cap=5)
    assert slot is not None
    try:
        samples = scrape()
    finally:
        slot_give_back(kind="sse", user_id=owner.pk, slot=slot)
    on = {"cluster": cluster.name, "part": "state"}
    files = {"cluster": cluster.name, "part": "files"}
    assert values(samples, "portal_cluster_poll_duration_seconds_count", **files) == [1.0]
    assert values(samples, "portal_cluster_last_poll_duration_seconds", **files) == [0.125]
    assert values(samples, "portal_cluster_poll_failures_total", **files) == [0.0]
    assert values(samples, "portal_cluster_poll_duration_seconds_count", **on) == [2.0]
    assert values(samples, "portal_cluster_poll_duration_seconds_sum", **on) == [1.0]
    assert values(samples, "portal_cluster_last_poll_duration_seconds", **on) == [0.75]
    assert values(samples, "portal_cluster_ssh_errors_total", **on) == [1.0]
    assert values(samples, "portal_cluster_poll_failures_total", **on) == [1.0]
    [lag] = values(samples, "portal_cluster_poll_lag_seconds", **on)
    assert 0 <= lag < 60
    assert values(samples, "portal_ingest_points_total") == [1.0]
    assert values(samples, "portal_ingest_gpu_samples_total") == [1.0]
    assert values(samples, "portal_live_streams", kind="sse") == [before + 1]
    assert len(values(samples, "portal_live_streams", kind="websocket")) == 1
    assert values(scrape(), "portal_live_streams", kind="sse") == [before]


@pytest.mark.django_db
def test_the_celery_queue_length_is_read_from_the_broker() -> None:
    client = health_redis()
    client.delete("celery")
    client.rpush("celery", "a", "b", "c")
    try:
        assert values(scrape(), "portal_celery_queue_messages", queue="celery") == [3.0]
    finally:
        client.delete("celery")


@pytest.mark.django_db
def test_cluster_gpus_come_from_its_last_status_read_and_a_failed_read_serves_none(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    nodes = [
        Node("n1", "MIXED", 64, 512_000, 4, 3, ("gpu",), ""),
        Node("n2", "IDLE", 64, 512_000, 4, 0, ("gpu",), ""),
        Node("n3", "DOWN*", 64, 512_000, 4, 0, ("gpu",), "not responding"),
    ]
    read = ClusterStatus(
        cluster=cluster.name, read_at=timezone.now(), nodes=nodes, pending_jobs=7, running_jobs=2
    )
    monkeypatch.setattr(cluster_status_module, "read_cluster_status", lambda c: read)
    cluster_status(cluster=cluster)
    on = {"cluster": cluster.name}
    samples = scrape()
    assert values(samples, "portal_cluster_gpus", **on) == [12.0]
    assert values(samples, "portal_cluster_gpus_allocated", **on) == [3.0]
    assert values(samples, "portal_cluster_gpus_free", **on) == [5.0]
    assert values(samples, "portal_cluster_slurm_pending_jobs", **on) == [7.0]
    assert values(samples, "portal_cluster_status_error", **on) == [0.0]
    failed = ClusterStatus(cluster=cluster.name, read_at=timezone.now(), error="Cannot reach")
    monkeypatch.setattr(cluster_status_module, "read_cluster_status", lambda c: failed)
    monkeypatch.setattr(cluster_status_module, "STATUS_INTERVAL", -1)
    cluster_status(cluster=cluster)
    samples = scrape()
    assert values(samples, "portal_cluster_status_error", cluster=cluster.name) == [1.0]
    assert values(samples, "portal_cluster_gpus", cluster=cluster.name) == []


@pytest.mark.django_db
def test_without_redis_the_database_figures_are_served_and_the_counters_are_not(
    project: Project, owner: User, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    factories.running_attempt(project, owner, cluster)
    poll_record(cluster_id=cluster.pk, seconds=0.5, result=PollResult())

    def down() -> dict[str, float]:
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(metrics_health, "health_read", down)
    samples = scrape()
    assert values(samples, "portal_redis_reachable") == [0.0]
    assert values(samples, "portal_cluster_poll_duration_seconds_count") == []
    assert values(samples, "portal_ingest_points_total") == []
    assert values(samples, "portal_cluster_running_jobs", cluster=cluster.name) == [1.0]
    assert len(values(samples, "portal_job_gpu_utilization_ratio")) == 2
