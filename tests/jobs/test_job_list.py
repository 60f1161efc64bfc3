"""The job list page: filters, keyset pages, a pinned query count, bulk cancel, live states."""

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.enums import State
from jobs.listing import Filters, access_for, job_page
from jobs.models import Attempt, Job
from projects.models import Membership, Project
from tests import factories

# --- the list ----------------------------------------------------------------------------


def _many(project: Project, user: User, cluster: Cluster, count: int) -> list[Job]:
    jobs = [
        Job(
            project=project,
            user=user,
            cluster=cluster,
            name=f"run-{i:03d}",
            command="true",
            gpus_per_node=i % 3,
            state=State.COMPLETED if i % 2 else State.RUNNING,
        )
        for i in range(count)
    ]
    return Job.objects.bulk_create(jobs)


def test_list_query_count_is_fixed_on_any_page(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster,
    django_assert_num_queries,
) -> None:  # fmt: skip
    _many(project, member, cluster, 120)
    client.force_login(member)
    # session, user, memberships with projects, clusters, capped count, one page of rows
    with django_assert_num_queries(6):
        first = client.get(reverse("job-list"))
    nxt = first.context["page"].next_cursor
    with django_assert_num_queries(6):
        second = client.get(reverse("job-list"), {"after": nxt, "sort": "newest"})
    assert len(second.context["rows"]) == 50
    with django_assert_num_queries(6):
        client.get(reverse("job-list"), {"sort": "-name", "state": "active", "q": "run"})


@pytest.mark.parametrize("sort", ["newest", "oldest", "name", "-name", "state", "-gpus"])
def test_keyset_pages_walk_every_job_once_both_ways(
    member: User, project: Project, cluster: Cluster, sort: str
) -> None:
    made = _many(project, member, cluster, 23)
    access = access_for(user=member)
    filters = Filters(sort=sort)
    seen: list[int] = []
    pages = []
    after = ""
    while True:
        page = job_page(access=access, filters=filters, after=after, size=5)
        pages.append(page)
        seen += [job.pk for job in page.jobs]
        if not page.next_cursor:
            break
        after = page.next_cursor
    assert sorted(seen) == sorted(job.pk for job in made)
    assert len(pages) == 5
    # Back from the last page to the first gives the same pages.
    back = job_page(access=access, filters=filters, before=pages[-1].prev_cursor, size=5)
    assert [j.pk for j in back.jobs] == [j.pk for j in pages[-2].jobs]
    assert pages[0].prev_cursor == ""


def test_filters_by_state_user_text_project_and_cluster(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster
) -> None:
    other = Project.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(user=member, project=other)
    factories.job(project, member, cluster, name="alpha", state=State.RUNNING)
    factories.job(project, owner, cluster, name="beta", state=State.FAILED)
    nlp, _ = factories.job(other, member, factories.cluster("bern"), name="gamma")
    client.force_login(member)

    def names(**query: str) -> list[str]:
        return [job.name for job, _ in client.get(reverse("job-list"), query).context["rows"]]

    assert names() == ["gamma", "beta", "alpha"]
    assert names(state="finished") == ["beta"]
    assert names(state="RUNNING") == ["alpha"]
    assert names(user="olivia") == ["beta"]
    assert names(q="alp") == ["alpha"]
    assert names(q=f"#{nlp.pk}") == ["gamma"]
    assert names(project="nlp") == ["gamma"]
    assert names(cluster="bern") == ["gamma"]
    assert names(sort="name") == ["alpha", "beta", "gamma"]
    assert names(project="not-mine") == []


@pytest.mark.parametrize(
    "cursor", ["not-base64!", "WyJhYmMiLCAxXQ", "WzEsICJ4Il0", "bnVsbA", "W251bGwsIDFd"]
)
@pytest.mark.parametrize("sort", ["newest", "-gpus", "name"])
def test_a_hand_edited_cursor_gives_the_first_page_not_an_error(
    client: Client, member: User, project: Project, cluster: Cluster, cursor: str, sort: str
) -> None:
    _many(project, member, cluster, 3)
    client.force_login(member)
    response = client.get(reverse("job-list"), {"after": cursor, "sort": sort})
    assert response.status_code == 200
    assert len(response.context["rows"]) in (0, 3)


def test_count_is_capped(member: User, project: Project, cluster: Cluster) -> None:
    from jobs import listing

    _many(project, member, cluster, 12)
    cap = listing.COUNT_CAP
    listing.COUNT_CAP = 10
    try:
        page = job_page(access=access_for(user=member), filters=Filters())
    finally:
        listing.COUNT_CAP = cap
    assert page.count == 11
    assert page.count_capped


def test_bulk_cancel_only_what_the_user_may_cancel(
    client: Client, member: User, owner: User, project: Project, cluster: Cluster
) -> None:
    mine, _ = factories.job(project, member, cluster, name="mine")
    owners, _ = factories.job(project, owner, cluster, name="owners")
    done, _ = factories.job(project, member, cluster, name="done", state=State.COMPLETED)
    client.force_login(member)
    listing = client.get(reverse("job-list"))
    cancellable = {job.name for job, may in listing.context["rows"] if may}
    assert cancellable == {"mine"}
    response = client.post(
        reverse("jobs-cancel"), {"job": [mine.pk, owners.pk, done.pk]}, follow=True
    )
    text = response.content.decode()
    assert "Cancelling 1 job." in text
    assert f"#{owners.pk}" in text
    assert Attempt.objects.get(job=mine).state == State.CANCELLED
    assert Attempt.objects.get(job=owners).state == State.QUEUED

    # An owner may cancel any job of the project.
    client.force_login(owner)
    client.post(reverse("jobs-cancel"), {"job": [owners.pk]})
    assert Attempt.objects.get(job=owners).state == State.CANCELLED


def test_bulk_cancel_needs_the_csrf_token(member: User, project: Project, cluster: Cluster) -> None:
    job, _ = factories.job(project, member, cluster)
    client = Client(enforce_csrf_checks=True)
    client.force_login(member)
    assert client.post(reverse("jobs-cancel"), {"job": [job.pk]}).status_code == 403
    assert Attempt.objects.get(job=job).state == State.QUEUED


def test_states_endpoint_gives_the_live_states(
    client: Client, member: User, project: Project, cluster: Cluster
) -> None:
    job, _ = factories.job(project, member, cluster, state=State.RUNNING)
    client.force_login(member)
    data = client.get(reverse("job-states"), {"ids": f"{job.pk},abc,999999"}).json()
    assert data["jobs"] == {str(job.pk): {"state": "RUNNING", "label": "Running"}}
    assert "COMPLETED" in data["final"]
