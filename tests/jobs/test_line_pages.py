"""A waiting job's place in its project's line and why, on the job list, the job page and
the API (detail and list), and cancel from the API while it waits."""

from datetime import timedelta

from django.test import Client
from django.urls import reverse

from jobs.enums import State
from jobs.models import Job
from jobs.services import job_submit
from projects.models import Quota
from tests import factories
from tests.helpers import bearer

PARTITIONS = {"gpu": factories.GPU_PARTITION}
REASON = (
    "Waiting for room: project vision has 1 of its 1 concurrent GPUs in use and this job "
    "needs 1. It goes to Slurm when a job of the project ends."
)


def _three(owner, project, cluster) -> list[Job]:
    factories.account(cluster, owner)
    Quota.objects.filter(project=project).update(max_concurrent_gpus=1)
    spec = factories.spec(nodes=1, gpus_per_node=1, time_limit=timedelta(hours=1))
    return [
        job_submit(user=owner, project=project, cluster=cluster, spec=spec, partitions=PARTITIONS)
        for _ in range(3)
    ]


def test_the_list_and_the_job_page_show_the_place_and_the_reason(
    owner, project, cluster, no_submission
) -> None:
    jobs = _three(owner, project, cluster)
    client = Client()
    client.force_login(owner)
    listing = client.get(reverse("job-list")).content.decode()
    assert f'data-job-waiting="{jobs[2].pk}">Place 2 of 2 in project vision' in listing
    assert REASON in listing
    page = client.get(reverse("job-page", args=[jobs[1].pk])).content.decode()
    shown = f"Next in project vision's line (2 waiting). {REASON}".replace("'", "&#x27;")
    assert f'id="fact-waiting" class="muted">{shown}</span>' in page


def test_the_api_answers_with_the_waiting_job_and_cancels_it(
    owner, project, cluster, tokens, no_submission
) -> None:
    jobs = _three(owner, project, cluster)
    api = bearer(tokens.owner)
    detail = api.get(f"/api/v1/jobs/{jobs[2].pk}/").json()
    assert (detail["state"], detail["waiting"]) == (
        "WAITING",
        {
            "place": 2,
            "line_length": 2,
            "words": "Place 2 of 2 in project vision's line.",
            "reason": REASON,
        },
    )
    listed = {row["id"]: row["waiting"] for row in api.get("/api/v1/jobs/").json()["results"]}
    assert listed[jobs[0].pk] is None and listed[jobs[1].pk]["place"] == 1
    cancelled = api.post(f"/api/v1/jobs/{jobs[1].pk}/cancel/").json()
    assert (cancelled["state"], cancelled["waiting"]) == (State.CANCELLED, None)
    assert api.get(f"/api/v1/jobs/{jobs[2].pk}/").json()["waiting"]["place"] == 1
