"""The job page's checkpoint list offers Fork and Resume; the fork form, its refusals, and the
fork's page naming its parent."""

from django.contrib.auth.models import User
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from jobs.enums import State
from jobs.lineage import forks_for_viewer
from jobs.models import CodeSnapshot, Job
from projects.models import Membership, Project, Quota
from tests import factories
from tests.jobs.test_lineage import STEP_20, parent  # noqa: F401  (the fixture)


def _page(client: Client, user: User, job: Job) -> str:
    client.force_login(user)
    response = client.get(reverse("job-page", args=[job.pk]))
    assert response.status_code == 200
    return response.content.decode()


def _fork_url(job: Job, step: int = 20) -> str:
    return f"{reverse('job-fork', args=[job.pk])}?attempt=1&checkpoint=step-{step}.pt"


def test_the_checkpoint_list_offers_fork_to_members_and_resume_to_the_submitter(
    client: Client,
    parent: Job,  # noqa: F811
    member: User,
) -> None:
    html = _page(client, parent.user, parent)
    assert f'href="{_fork_url(parent).replace("&", "&amp;")}"' in html
    assert f'action="{reverse("job-resume", args=[parent.pk])}"' in html
    html = _page(client, member, parent)
    assert 'checkpoint=step-20.pt"' in html
    assert f'action="{reverse("job-resume", args=[parent.pk])}"' not in html


def test_the_fork_form_is_the_parents_submit_form_and_makes_a_fork(
    client: Client,
    parent: Job,  # noqa: F811
    no_submission: list[int],
) -> None:
    client.force_login(parent.user)
    form = client.get(_fork_url(parent))
    html = form.content.decode()
    assert form.status_code == 200
    assert "<h1>Fork of resnet</h1>" in html and 'id="fork-from"' in html
    assert "at step <strong>20</strong> (attempt 1)" in html and STEP_20 in html
    assert 'value="resnet fork"' in html and "--lr 0.01 --steps 60</textarea>" in html
    posted = client.post(_fork_url(parent), _form(parent, command="python train.py --lr 0.003"))
    fork = Job.objects.get(parent=parent)
    assert posted.status_code == 302 and posted["Location"] == f"/jobs/{fork.pk}/"
    assert (fork.parent_step, fork.params["lr"], fork.attempts.get().resume_from) == (
        20,
        0.003,
        STEP_20,
    )
    page = _page(client, parent.user, fork)
    assert f'Forked from <a href="/jobs/{parent.pk}/">resnet (#{parent.pk})</a>' in page
    assert "at step <strong>20</strong>" in page


def test_a_fork_to_another_cluster_is_refused_on_the_form(
    client: Client,
    parent: Job,  # noqa: F811
    no_submission: list[int],
) -> None:
    elsewhere = factories.cluster("bern")
    factories.account(elsewhere, None)
    cache.set(f"clusters:partitions:{elsewhere.pk}", {"gpu": factories.GPU_PARTITION}, 600)
    client.force_login(parent.user)
    answer = client.post(_fork_url(parent), _form(parent, cluster="bern"))
    assert answer.status_code == 200
    assert f"Job #{parent.pk}&#x27;s checkpoint lies on cluster alps" in answer.content.decode()
    assert not Job.objects.filter(parent=parent).exists() and no_submission == []


def test_resume_from_the_list(
    client: Client,
    parent: Job,  # noqa: F811
    no_submission: list[int],
) -> None:
    client.force_login(parent.user)
    answer = client.post(
        reverse("job-resume", args=[parent.pk]), {"attempt": "1", "checkpoint": "step-20.pt"}
    )
    assert answer.status_code == 302
    second = parent.attempts.get(number=2)
    assert (second.resume_from, second.state) == (STEP_20, State.QUEUED)
    again = client.post(reverse("job-resume", args=[parent.pk]), {"step": "40"}, follow=True)
    assert "is still queued: cancel it first, or fork it" in again.content.decode()
    assert parent.attempts.count() == 2


def test_the_outsider_gets_404(
    client: Client,
    parent: Job,  # noqa: F811
    outsider: User,
) -> None:
    client.force_login(outsider)
    assert client.get(_fork_url(parent)).status_code == 404
    assert client.post(_fork_url(parent), _form(parent)).status_code == 404
    assert client.post(reverse("job-resume", args=[parent.pk]), {"step": "20"}).status_code == 404
    assert parent.attempts.count() == 1


def _form(job: Job, **changes: str) -> dict[str, str]:
    values = {
        "project": str(job.project_id),
        "cluster": job.cluster.name,
        "name": "resnet fork",
        "template": job.template,
        "command": job.command,
        "nodes": "1",
        "gpus_per_node": "1",
        "cpus_per_task": "1",
        "time_limit": "0:10:00",
        "partition": "gpu",
    }
    values.update(changes)
    return values


def test_a_fork_into_another_project_takes_the_code_only_from_that_projects_snapshots(
    client: Client,
    parent: Job,  # noqa: F811
    no_submission: list[int],
) -> None:
    owner = parent.user
    code = CodeSnapshot.objects.create(
        project=parent.project, sha256="ab" * 32, size=1, unpacked_size=1, files=1, created_by=owner
    )
    Job.objects.filter(pk=parent.pk).update(code=code)
    parent.refresh_from_db()
    other = Project.objects.create(slug="nlp", name="NLP")
    Quota.objects.create(project=other, gpu_hours_per_period=10, max_concurrent_gpus=4)
    Membership.objects.create(user=owner, project=other, role=Membership.Role.MEMBER)
    client.force_login(owner)
    form = _form(parent, project=str(other.pk), code_from=str(parent.pk))
    refused = client.post(_fork_url(parent), form)
    assert refused.status_code == 200
    assert "code snapshot is in project vision, not in nlp: upload the code here" in (
        refused.content.decode()
    )
    assert not Job.objects.filter(parent=parent).exists()
    same = CodeSnapshot.objects.create(
        project=other, sha256="ab" * 32, size=1, unpacked_size=1, files=1, created_by=owner
    )
    assert client.post(_fork_url(parent), form).status_code == 302
    assert Job.objects.get(parent=parent).code == same


def test_the_parents_page_lists_the_forks_its_viewer_may_see(
    client: Client,
    parent: Job,  # noqa: F811
    member: User,
    django_assert_num_queries,
) -> None:
    owner = parent.user
    ours, _ = factories.job(
        parent.project, member, parent.cluster, name="lr 3e-3", parent=parent, parent_step=40,
        parent_checkpoint=STEP_20, state=State.RUNNING,
    )  # fmt: skip
    # The owner's fork into a project the member is not in: not the member's to see.
    other = Project.objects.create(slug="nlp", name="NLP")
    Membership.objects.create(user=owner, project=other, role=Membership.Role.MEMBER)
    theirs, _ = factories.job(
        other, owner, parent.cluster, name="secret fork", parent=parent, parent_step=20,
        parent_checkpoint=STEP_20, state=State.COMPLETED,
    )  # fmt: skip
    html = _page(client, member, parent)
    forks = html[html.index('id="job-forks"') :].split("</p>", 1)[0]
    assert f"#{ours.pk} lr 3e-3</a> from step <strong>40</strong>" in forks
    assert "Running" in forks
    assert "secret fork" not in html and f"#{theirs.pk}" not in forks
    forks = _page(client, owner, parent)
    forks = forks[forks.index('id="job-forks"') :].split("</p>", 1)[0]
    # By step: the fork from step 20 first.
    assert forks.index(f"#{theirs.pk} secret fork") < forks.index(f"#{ours.pk} lr 3e-3")
    assert "Completed" in forks
    # A fork's own page names its parent and lists no forks of its own.
    assert 'id="job-forks"' not in _page(client, owner, theirs)
    # One query for the list, however many forks (the viewer's membership in the same query).
    for step in (40, 60):
        factories.job(parent.project, member, parent.cluster, parent=parent, parent_step=step)
    with django_assert_num_queries(1):
        assert len(forks_for_viewer(user=member, job=parent)) == 3
