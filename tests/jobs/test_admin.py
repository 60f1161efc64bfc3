from datetime import timedelta

from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from devtools.keys import new_key_pair
from jobs.enums import State
from jobs.models import Attempt, Job


def _jobs(project, user, count: int) -> list[Job]:
    _, host_key = new_key_pair()
    cluster = Cluster.objects.create(name="alps", ssh_host="login", host_key=host_key)
    jobs = Job.objects.bulk_create(
        Job(
            project=project,
            user=user,
            cluster=cluster,
            name=f"run {n}",
            command="python train.py",
            time_limit=timedelta(hours=1),
        )
        for n in range(count)
    )
    Attempt.objects.bulk_create(
        Attempt(job=job, number=1, state=State.RUNNING, slurm_job_id=str(100 + n))
        for n, job in enumerate(jobs)
    )
    return jobs


def test_job_list_query_count_is_fixed(
    client: Client, staff, member, project, django_assert_max_num_queries
) -> None:
    _jobs(project, member, 60)
    client.force_login(staff)
    # session, user, count x2, page (project, user, cluster joined), date hierarchy,
    # cluster and project filter choices
    with django_assert_max_num_queries(10):
        response = client.get(reverse("admin:jobs_job_changelist"))
    assert response.status_code == 200
    assert b"run 59" in response.content


def test_job_page_shows_attempts(client: Client, staff, member, project) -> None:
    job = _jobs(project, member, 1)[0]
    client.force_login(staff)
    response = client.get(reverse("admin:jobs_job_change", args=[job.pk]))
    assert response.status_code == 200
    assert b"100" in response.content


def test_attempt_list_filters_by_state(client: Client, staff, member, project) -> None:
    _jobs(project, member, 3)
    client.force_login(staff)
    response = client.get(reverse("admin:jobs_attempt_changelist"), {"state": "RUNNING"})
    assert response.status_code == 200
    assert b"3 attempts" in response.content
