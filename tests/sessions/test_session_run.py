"""From a session to a run, without a cluster: who reaches it, what the form takes from the
session, which directories are refused, and which cards a session's page shows.

The form read and the submission over a real login are in test_session_run_sandbox.py.
"""

import json

import pytest
from django.test import Client
from django.utils import timezone

from jobs.enums import State, Template
from jobs.models import Job
from sessions.to_run import root_problem, run_setup, run_spec
from tests import factories

SESSION_SETUP = "module load cuda/12\ncd -- ~/project\nconda activate torch\n  pushd data"


@pytest.fixture
def session(project, owner, cluster) -> Job:
    job, attempt = factories.session(
        project,
        owner,
        cluster,
        gpus_per_node=2,
        partition="gpu",
        setup=SESSION_SETUP,
    )
    attempt.state = State.RUNNING
    attempt.started_at = timezone.now()
    attempt.run_dir = "/home/u/portal-runs/1"
    attempt.save()
    Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
    return Job.objects.get(pk=job.pk)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_run_takes_the_sessions_environment_and_resources(session) -> None:
    spec = run_spec(session)
    assert spec.template == Template.COMMAND and spec.command == ""
    assert (spec.gpus_per_node, spec.nodes, spec.partition) == (2, 1, "gpu")
    assert spec.time_limit == session.time_limit and spec.name == "lab run"
    assert spec.code is None and spec.code_git_url == ""
    # The run starts in its snapshot: the set-up's `cd` would leave it for the live directory.
    assert spec.setup.splitlines() == [
        "module load cuda/12",
        "# cd -- ~/project  # the run starts in its snapshot of the session's directory",
        "conda activate torch",
        "# pushd data  # the run starts in its snapshot of the session's directory",
    ]
    assert run_setup("cdx=1\necho cd") == "cdx=1\necho cd"


@pytest.mark.parametrize(
    ("path", "refused"),
    [
        ("", "home directory"),  # the workdir file is blank for the home directory
        ("relative/dir", "not an absolute path"),
        ("/home/u/portal-runs/1", "holds its run directory"),
        ("/home/u/portal-runs", "holds its run directory"),
        ("/", "holds its run directory"),
        ("/home/u", "holds its run directory"),
        ("/home/u/project", None),
        ("/home/u/portal-runs/1/code", None),  # a session's own code snapshot, unpacked
        ("/home/u/portal-runs/10", None),
    ],
)
def test_which_working_directories_may_become_a_runs_code(path, refused) -> None:
    problem = root_problem(path=path, run_dir="/home/u/portal-runs/1", session_id=5)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem


def test_only_the_owner_reaches_the_form_and_the_api(
    session, owner, member, viewer, outsider, staff, settings
) -> None:
    settings.SESSION_STAFF_MAY_OPEN = True  # opening is not submitting from its directory
    for other in (member, viewer, outsider, staff):
        client = _client(other)
        assert client.get(f"/sessions/{session.pk}/run/").status_code == 404, other.username
        posted = client.post(f"/sessions/{session.pk}/run/", {"command": "python train.py"})
        assert posted.status_code == 404, other.username
        api = client.post(
            f"/api/v1/jobs/{session.pk}/session-run/",
            json.dumps({"command": "python train.py"}),
            content_type="application/json",
        )
        assert api.status_code == 404, other.username
    assert Job.objects.count() == 1


def test_a_job_that_is_no_session_has_no_run_form(project, owner, cluster) -> None:
    job, _ = factories.job(project, owner, cluster)
    assert _client(owner).get(f"/sessions/{job.pk}/run/").status_code == 404


def test_a_session_not_started_says_so(session, owner) -> None:
    session.attempts.update(started_at=None, state=State.PENDING)
    response = _client(owner).get(f"/sessions/{session.pk}/run/", follow=True)
    assert response.redirect_chain[-1][0] == f"/jobs/{session.pk}/"
    assert "has not started yet" in response.content.decode()
    api = _client(owner).post(
        f"/api/v1/jobs/{session.pk}/session-run/",
        json.dumps({"command": "python train.py"}),
        content_type="application/json",
    )
    assert api.status_code == 400 and "has not started yet" in api.content.decode()


def test_the_api_wants_a_command_before_reading_the_directory(session, owner) -> None:
    api = _client(owner).post(
        f"/api/v1/jobs/{session.pk}/session-run/", "{}", content_type="application/json"
    )
    assert api.status_code == 400 and "command" in api.json()


# What a session's page leaves out, and what it keeps (ids in templates/monitoring/job.html).
TRAINING_ONLY = ('id="num-loss"', 'id="num-mfu"', 'id="metrics-section"', 'id="run-notes"')
KEPT = ('id="session-card"', 'id="gpu-section"', 'id="log-section"', 'id="session-time-left"')


def test_a_sessions_page_shows_the_session_cards_not_the_training_ones(session, owner) -> None:
    page = _client(owner).get(f"/jobs/{session.pk}/").content.decode()
    for card in KEPT:
        assert card in page, card
    for card in TRAINING_ONLY:
        assert card not in page, card
    assert 'id="job-params"' not in page and 'id="job-plan"' not in page
    assert 'id="session-open"' in page
    assert f'href="/sessions/{session.pk}/run/"' in page and "Submit as a training job" in page


def test_a_training_jobs_page_keeps_its_cards(project, owner, cluster) -> None:
    job, _ = factories.job(project, owner, cluster)
    page = _client(owner).get(f"/jobs/{job.pk}/").content.decode()
    for card in TRAINING_ONLY:
        assert card in page, card
    assert 'id="session-card"' not in page and "Submit as a training job" not in page


def test_another_member_sees_no_submit_action(session, member) -> None:
    page = _client(member).get(f"/jobs/{session.pk}/").content.decode()
    assert 'id="session-card"' in page
    assert "Submit as a training job" not in page and 'id="session-open"' not in page
