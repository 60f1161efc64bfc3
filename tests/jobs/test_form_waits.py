"""The submit form's wait by cluster: for the spec being entered, how long similar jobs
waited on each cluster the project may use, and which one started them soonest.

The history is recorded attempts (factories) with chosen submit and start times.
"""

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from clusters.models import Cluster, ClusterAccount
from jobs.enums import State
from jobs.models import Attempt
from jobs.queue.waits import waits_by_cluster
from projects.models import Project, Quota
from tests import factories
from tests.jobs.test_views import _form

pytestmark = pytest.mark.django_db


def _waited(
    project: Project, user: User, cluster: Cluster, *minutes: float, **spec: object
) -> None:
    """One started attempt per wait, submitted hours apart within the last four weeks."""
    now = timezone.now()
    for hours, wait in enumerate(minutes, start=1):
        values = {"partition": "gpu", "nodes": 1, "gpus_per_node": 1, **spec}
        _, attempt = factories.job(project, user, cluster, **values)
        submitted = now - timedelta(hours=hours)
        Attempt.objects.filter(pk=attempt.pk).update(
            state=State.COMPLETED,
            submitted_at=submitted,
            started_at=submitted + timedelta(minutes=wait),
        )


@pytest.fixture
def history(
    project: Project, member: User, cluster: Cluster, service_account: ClusterAccount
) -> dict[str, Cluster]:
    """alps (the form's cluster): 20, 30, 40 min; bern: 1, 2, 3 min; chur, which the project's
    quota does not name: 0 min; davos, where the member has no account: 0 min."""
    bern, chur, davos = (factories.cluster(name=n) for n in ("bern", "chur", "davos"))
    factories.account(bern, None)
    factories.account(chur, None)
    _waited(project, member, cluster, 20, 30, 40)
    _waited(project, member, bern, 1, 2, 3)
    _waited(project, member, chur, 0, 0, 0)
    _waited(project, member, davos, 0, 0, 0)
    _waited(project, member, bern, 0, 0, 0, nodes=2)  # another shape: not similar
    Quota.objects.get(project=project).allowed_clusters.set([cluster, bern, davos])
    return {"alps": cluster, "bern": bern, "chur": chur, "davos": davos}


def test_the_form_shows_the_wait_on_each_cluster_the_project_may_use(
    client: Client, member: User, project: Project, history: dict[str, Cluster]
) -> None:
    client.force_login(member)
    estimate = client.post(reverse("job-preview"), _form(history["alps"], project)).json()[
        "estimate"
    ]
    # [20, 30, 40]: median 30, p90 at rank 1.8 -> 38; [1, 2, 3]: median 2, p90 2.8 -> 3 min.
    assert estimate["waits"] == [
        {
            "cluster": "alps",
            "typical": "30 min median, 38 min p90 over 3 jobs",
            "median_seconds": 1800.0,
            "count": 3,
            "chosen": True,
            "soonest": False,
        },
        {
            "cluster": "bern",
            "typical": "2 min median, 3 min p90 over 3 jobs",
            "median_seconds": 120.0,
            "count": 3,
            "chosen": False,
            "soonest": True,
        },
    ]
    assert (
        estimate["sooner"] == "Similar jobs started sooner on bern: 2 min median (30 min on alps)."
    )
    assert (
        estimate["typical_wait"] == "30 min median, 38 min p90 over 3 jobs (1 node x 1 GPU on gpu)"
    )


def test_choosing_the_sooner_cluster_leaves_nothing_to_suggest(
    client: Client, member: User, project: Project, history: dict[str, Cluster]
) -> None:
    client.force_login(member)
    estimate = client.post(reverse("job-preview"), _form(history["bern"], project)).json()[
        "estimate"
    ]
    assert [(w["cluster"], w["chosen"], w["soonest"]) for w in estimate["waits"]] == [
        ("bern", True, True),
        ("alps", False, False),
    ]
    assert estimate["sooner"] == ""


def test_a_quota_naming_no_clusters_compares_every_usable_one(
    client: Client, member: User, project: Project, history: dict[str, Cluster]
) -> None:
    Quota.objects.get(project=project).allowed_clusters.clear()
    client.force_login(member)
    estimate = client.post(reverse("job-preview"), _form(history["alps"], project)).json()[
        "estimate"
    ]
    # davos stays out: the member has no account there, and it has no shared one.
    assert [w["cluster"] for w in estimate["waits"]] == ["alps", "bern", "chur"]
    assert estimate["sooner"] == (
        "Similar jobs started sooner on chur: under 1 min median (30 min on alps)."
    )


def test_another_shape_has_its_own_history(
    client: Client, member: User, project: Project, history: dict[str, Cluster]
) -> None:
    client.force_login(member)
    data = _form(history["alps"], project, nodes=2)
    estimate = client.post(reverse("job-preview"), data).json()["estimate"]
    assert [(w["cluster"], w["count"], w["soonest"]) for w in estimate["waits"]] == [
        ("alps", 0, False),
        ("bern", 3, True),
    ]
    assert estimate["sooner"] == (
        "Similar jobs started sooner on bern: under 1 min median "
        "(too few similar jobs on alps to tell)."
    )


def test_the_waits_of_every_cluster_come_from_one_query(
    history: dict[str, Cluster], django_assert_num_queries
) -> None:
    ids = [c.pk for c in history.values()]
    with django_assert_num_queries(1):  # one UNION ALL of a limited scan per cluster
        waits = waits_by_cluster(
            cluster_ids=ids, partition="gpu", nodes=1, gpus_per_node=1, now=timezone.now()
        )
    assert {name: waits[c.pk].count for name, c in history.items()} == {
        "alps": 3,
        "bern": 3,
        "chur": 3,
        "davos": 3,
    }
    assert waits[history["bern"].pk].median == timedelta(minutes=2)


def test_an_outsider_gets_no_estimate_and_no_cluster_waits(
    client: Client, outsider: User, project: Project, history: dict[str, Cluster]
) -> None:
    client.force_login(outsider)
    answer = client.post(reverse("job-preview"), _form(history["alps"], project))
    assert answer.status_code == 200
    data = answer.json()
    assert data["estimate"] is None
    assert "project" in data["errors"]
    assert "bern" not in answer.content.decode()
    client.logout()
    anonymous = client.post(reverse("job-preview"), _form(history["alps"], project))
    assert anonymous.status_code == 302 and "/login" in anonymous["Location"]


def test_the_form_page_has_the_wait_by_cluster_table(
    client: Client, member: User, history: dict[str, Cluster]
) -> None:
    client.force_login(member)
    page = client.get(reverse("job-new")).content.decode()
    assert 'id="est-waits-rows"' in page and 'id="est-sooner"' in page
