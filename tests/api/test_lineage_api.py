"""Resume and fork over REST: the chosen checkpoint, the lineage in the job object, refusals."""

from django.contrib.auth.models import User

from jobs.models import Job
from tests.helpers import Tokens, bearer
from tests.jobs.test_lineage import STEP_20, parent  # noqa: F401  (the fixture)


def test_a_fork_from_step_20_with_a_new_learning_rate(
    parent: Job,  # noqa: F811
    tokens: Tokens,
    no_submission: list[int],
) -> None:
    client = bearer(tokens.member)
    answer = client.post(
        f"/api/v1/jobs/{parent.pk}/fork/",
        {"step": 20, "command": "python train.py --lr 0.003 --steps 60"},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    body = answer.json()
    assert (body["parent"], body["parent_step"], body["parent_checkpoint"]) == (
        parent.pk,
        20,
        STEP_20,
    )
    assert (body["name"], body["user"], body["params"]["lr"]) == ("resnet fork", "mia", 0.003)
    attempts = client.get(f"/api/v1/jobs/{body['id']}/attempts/").json()
    assert [a["resume_from"] for a in attempts] == [STEP_20]
    # The parent's own object says it has no parent.
    assert client.get(f"/api/v1/jobs/{parent.pk}/").json()["parent"] is None


def test_a_fork_from_a_step_never_saved_names_the_saved_ones(
    parent: Job,  # noqa: F811
    tokens: Tokens,
    no_submission: list[int],
) -> None:
    answer = bearer(tokens.owner).post(
        f"/api/v1/jobs/{parent.pk}/fork/", {"step": 25}, content_type="application/json"
    )
    assert answer.status_code == 400
    assert answer.json()["step"] == ["No checkpoint at step 25; it has steps 20, 40, 60."]
    assert not Job.objects.filter(parent=parent).exists() and no_submission == []


def test_resume_from_step_20_then_again_while_it_is_queued(
    parent: Job,  # noqa: F811
    owner: User,
    tokens: Tokens,
    no_submission: list[int],
) -> None:
    client = bearer(tokens.owner)
    answer = client.post(
        f"/api/v1/jobs/{parent.pk}/resume/", {"step": 20}, content_type="application/json"
    )
    assert answer.status_code == 202, answer.content
    assert (answer.json()["latest_attempt"], answer.json()["state"]) == (2, "QUEUED")
    attempts = client.get(f"/api/v1/jobs/{parent.pk}/attempts/").json()
    assert [a["resume_from"] for a in attempts] == ["", STEP_20]
    again = client.post(
        f"/api/v1/jobs/{parent.pk}/resume/",
        {"attempt": 1, "checkpoint": "step-40.pt"},
        content_type="application/json",
    )
    assert again.status_code == 400
    assert "is still queued: cancel it first, or fork it" in again.json()["non_field_errors"][0]
