"""A sweep's code: every trial runs one snapshot (uploaded, a job's, or a git URL fetched
once); a trial's job page links back; a resumed sweep's budget is checked again."""

import subprocess
from decimal import Decimal
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster
from jobs.code.snapshots import snapshot_store
from jobs.enums import State
from jobs.models import CodeSnapshot, Job
from projects.models import Project, Quota
from sweeps.errors import SweepError
from sweeps.models import Sweep, Trial
from sweeps.services import sweep_pause, sweep_resume
from sweeps.tick import sweep_advance
from tests import factories
from tests.fixtures.jobs import Tokens
from tests.jobs.test_code_fetch import local_git, origin  # noqa: F401 - fixtures
from tests.jobs.test_code_form import _tar
from tests.sweeps.helpers import falling, new_sweep, run
from tests.sweeps.test_pages import API_BODY, FORM

pytestmark = pytest.mark.usefixtures("no_submission")


@pytest.fixture
def snapshot_dir(settings, tmp_path: Path) -> Path:
    settings.CODE_SNAPSHOT_DIR = tmp_path / "snapshots"
    return settings.CODE_SNAPSHOT_DIR


def _ticked(sweep_id: int) -> list[Trial]:
    assert sweep_advance(sweep_id=sweep_id)
    return list(Trial.objects.filter(sweep_id=sweep_id).select_related("job").order_by("number"))


def _codes(trials: list[Trial]) -> set[tuple[int | None, str]]:
    return {(t.job.code_id, t.job.code_commit) for t in trials if t.job is not None}


def test_the_api_takes_a_snapshot_and_every_trial_runs_it(
    tokens: Tokens, submitter: User, project: Project, cluster: Cluster, snapshot_dir: Path
) -> None:
    archive = _tar("train.py").read()
    snapshot, _ = snapshot_store(user=submitter, project=project, chunks=[archive])
    api = Client(HTTP_AUTHORIZATION=f"Bearer {tokens.member}")
    body = {
        **API_BODY,
        "max_concurrent": 3,
        "code": snapshot.sha256,
        "code_commit": "a" * 40,
        "code_branch": "main",
    }
    made = api.post(reverse("api-sweeps"), body, "application/json")
    assert made.status_code == 201, made.json()
    assert made.json()["code"]["sha256"] == snapshot.sha256
    trials = _ticked(made.json()["id"])
    assert len(trials) == 3 and _codes(trials) == {(snapshot.pk, "a" * 40)}
    # A hash the project does not have is named under its field; a snapshot and a URL clash.
    missing = api.post(reverse("api-sweeps"), {**body, "code": "b" * 64}, "application/json")
    assert missing.status_code == 400 and "has no code snapshot" in missing.json()["code"][0]
    both = {**body, "code_git_url": "https://example.org/x.git"}
    assert "code_git_url" in api.post(reverse("api-sweeps"), both, "application/json").json()


def test_the_form_takes_an_archive_or_the_code_of_a_job(
    client: Client, submitter: User, project: Project, cluster: Cluster, snapshot_dir: Path
) -> None:
    client.force_login(submitter)
    form = {**FORM, "cluster": str(cluster.pk), "first_trials": ""}
    response = client.post(
        reverse("sweep-new", args=["vision"]), {**form, "code_archive": _tar("train.py")}
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    sweep = Sweep.objects.get()
    assert sweep.code is not None and sweep.code.files == 1
    trials = _ticked(sweep.pk)
    assert _codes(trials) == {(sweep.code_id, "")}
    page = client.get(reverse("sweep-page", args=[sweep.pk])).content.decode()
    assert f"snapshot <code>{sweep.code.sha256[:12]}</code>" in page

    # "Sweep this job's code": the new-sweep form named after a job runs its snapshot.
    job = trials[0].job
    assert job is not None
    blank = client.get(reverse("sweep-new", args=["vision"]) + f"?code_from={job.pk}")
    assert f"Runs the code of job #{job.pk}" in blank.content.decode()
    client.post(
        reverse("sweep-new", args=["vision"]), {**form, "name": "again", "code_from": job.pk}
    )
    again = Sweep.objects.get(name="again")
    assert again.code_id == sweep.code_id and CodeSnapshot.objects.count() == 1


def test_a_git_url_is_fetched_once_and_every_trial_runs_that_commit(
    local_git: None,  # noqa: F811
    origin: tuple[Path, str],  # noqa: F811
    submitter: User,
    project: Project,
    cluster: Cluster,
) -> None:
    repo, commit = origin
    sweep = new_sweep(
        submitter, project, cluster, code_git_url=f"file://{repo}", code_git_ref="main"
    )
    first = _ticked(sweep.pk)
    sweep.refresh_from_db()
    assert sweep.code is not None and sweep.code_commit == commit and sweep.code_branch == "main"
    # The branch moves on; the trials started later still run the commit fetched first.
    (repo / "later.py").write_text("print('later')\n")
    for args in (["add", "."], ["-c", "user.name=t", "-c", "user.email=t@x", "commit", "-qm", "2"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    for trial in first:
        run(trial, falling(2.0, 0.01, 20), state=State.COMPLETED)
    trials = _ticked(sweep.pk)
    assert len(trials) == 4 and _codes(trials) == {(sweep.code_id, commit)}
    assert CodeSnapshot.objects.count() == 1


def test_a_git_url_that_cannot_be_fetched_stops_the_sweep_before_any_trial(
    local_git: None,  # noqa: F811
    submitter: User,
    project: Project,
    cluster: Cluster,
    tmp_path: Path,
) -> None:
    sweep = new_sweep(submitter, project, cluster, code_git_url=f"file://{tmp_path / 'nowhere'}")
    assert _ticked(sweep.pk) == []
    sweep.refresh_from_db()
    assert sweep.state == Sweep.State.STOPPED
    assert sweep.message.startswith("The sweep stopped before its first trial: git could not")
    assert not Job.objects.exists()


def test_a_trials_job_page_links_back_to_its_sweep_and_trial(
    client: Client, member: User, submitter: User, project: Project, cluster: Cluster
) -> None:
    sweep = new_sweep(submitter, project, cluster)
    trial = _ticked(sweep.pk)[1]
    client.force_login(member)
    page = client.get(reverse("job-page", args=[trial.job_id])).content.decode()
    assert 'id="job-sweep"' in page
    assert f'href="/sweeps/{sweep.pk}/#trial-1">1</a> of sweep' in page
    assert f'<a href="/sweeps/{sweep.pk}/">lr search</a>' in page
    plain, _ = factories.job(project, submitter, cluster)
    assert 'id="job-sweep"' not in client.get(reverse("job-page", args=[plain.pk])).content.decode()
    sweep_page = client.get(reverse("sweep-page", args=[sweep.pk])).content.decode()
    assert 'id="trial-1"' in sweep_page


def test_a_paused_sweep_resumes_only_if_its_remaining_trials_fit_the_budget(
    client: Client, submitter: User, project: Project, cluster: Cluster
) -> None:
    # 8 trials of 1 GPU x 30 min: two start (their attempts reserve 1 GPU-h), six remain (3).
    sweep = new_sweep(submitter, project, cluster)
    assert len(_ticked(sweep.pk)) == 2
    sweep_pause(user=submitter, sweep=sweep)
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("3.5"))
    with pytest.raises(SweepError) as refused:
        sweep_resume(user=submitter, sweep=sweep)
    assert refused.value.message == (
        "The sweep cannot resume: what it has still to run (6 trials) needs 3 GPU-h, 2.5 GPU-h "
        "left this month in project vision. Stop it and start a smaller sweep, or ask an "
        "owner for more budget."
    )
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.PAUSED
    client.force_login(submitter)
    page = client.post(reverse("sweep-action", args=[sweep.pk, "resume"]), follow=True)
    assert "The sweep cannot resume: what it has still to run (6 trials)" in page.content.decode()
    Quota.objects.filter(project=project).update(gpu_hours_per_period=Decimal("4"))
    sweep_resume(user=submitter, sweep=sweep)
    assert Sweep.objects.get(pk=sweep.pk).state == Sweep.State.RUNNING
