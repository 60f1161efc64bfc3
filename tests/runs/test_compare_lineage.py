"""Compare's lineage: each fork's parent and step, and the job settings that differ."""

from datetime import timedelta

from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.models import Job
from monitoring.runs.lineage import Lineage, compare_lineage
from projects.models import Project
from tests import factories


def _runs(project: Project, owner: User, cluster: Cluster) -> list[Job]:
    parent, _ = factories.job(project, owner, cluster, name="base", command="train.py --lr 0.01")
    fork, _ = factories.job(
        project,
        owner,
        cluster,
        name="lr 3e-3",
        command="train.py --lr 0.003",
        nodes=2,
        time_limit=timedelta(hours=2),
        parent=parent,
        parent_step=20,
        parent_checkpoint="/home/svc/runs/a1/checkpoints/step-20.pt",
    )
    elsewhere = Project.objects.create(slug="hidden", name="Hidden")
    stranger_parent, _ = factories.job(elsewhere, owner, cluster, name="secret base")
    cousin, _ = factories.job(
        project,
        owner,
        cluster,
        name="cousin",
        command="train.py --lr 0.01",
        parent=stranger_parent,
        parent_step=40,
    )
    return [parent, fork, cousin]


def test_forks_name_their_parent_and_step_and_the_differing_settings(
    project: Project, owner: User, cluster: Cluster, django_assert_num_queries
) -> None:
    parent, fork, cousin = _runs(project, owner, cluster)
    with django_assert_num_queries(1):
        found = compare_lineage(jobs=[parent, fork, cousin])
    assert found["lineage"] == [
        Lineage(fork.pk, "lr 3e-3", parent.pk, "base", 20, parent_compared=True),
        # A parent in another project is named by its id only.
        Lineage(cousin.pk, "cousin", cousin.parent_id, "", 40, parent_compared=False),
    ]
    assert found["spec_diff"] == [
        {
            "key": "command",
            "values": ["train.py --lr 0.01", "train.py --lr 0.003", "train.py --lr 0.01"],
        },
        {"key": "nodes", "values": [1, 2, 1]},
        {"key": "time_limit", "values": ["0:10:00", "2:00:00", "0:10:00"]},
    ]


def test_runs_of_one_spec_without_forks_say_so(
    project: Project, owner: User, cluster: Cluster
) -> None:
    a, _ = factories.job(project, owner, cluster, name="a")
    b, _ = factories.job(project, owner, cluster, name="b")
    assert compare_lineage(jobs=[a, b]) == {"lineage": [], "spec_diff": []}


def test_the_compare_page_shows_the_lineage_and_the_differing_job_settings(
    client: Client, project: Project, owner: User, cluster: Cluster
) -> None:
    parent, fork, cousin = _runs(project, owner, cluster)
    client.force_login(owner)
    page = client.get(
        reverse("project-compare", args=["vision"]), {"runs": f"{parent.pk},{fork.pk},{cousin.pk}"}
    )
    html = page.content.decode()
    assert page.status_code == 200 and 'id="compare-lineage"' in html
    assert (
        f'<a href="/jobs/{fork.pk}/">lr 3e-3</a> <span class="muted">#{fork.pk}</span> was forked '
        f'from <a href="/jobs/{parent.pk}/">base</a> <span class="muted">#{parent.pk}</span> at '
        "step <strong>20</strong> (compared here)."
    ) in html
    assert "secret base" not in html and f"#{cousin.parent_id}</span> at step" in html
    assert "<code>train.py --lr 0.003</code>" in html and "<code>2:00:00</code>" in html
