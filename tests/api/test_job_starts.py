"""POST /api/v1/jobs/starts/: when a job would start, asked with a submission's body.

Refusals come before any Slurm command: a project not the caller's, a viewer, a cluster
the project may not use, a spec over the quota. A valid ask of an unreachable cluster is
answered with the problem per option (the sandbox's real answers: tests/e2e)."""

import json

import pytest

from clusters.ssh import stats
from jobs.models import Job
from projects.models import Quota
from tests import factories
from tests.helpers import Tokens, bearer

SPEC = {
    "project": "vision",
    "cluster": "alps",
    "name": "api-job",
    "command": "python train.py",
    "partition": "gpu",
    "cpus_per_task": 1,
    "gpus_per_node": 2,
    "time_limit": "00:40:00",
}

pytestmark = pytest.mark.usefixtures("service_account")


def _ask(token: str, **change: object):
    return bearer(token).post(
        "/api/v1/jobs/starts/", json.dumps({**SPEC, **change}), content_type="application/json"
    )


@pytest.mark.parametrize(
    ("who", "change", "status", "field"),
    [
        ("outsider", {}, 400, "project"),
        ("viewer", {}, 403, None),
        ("member", {"cluster": "bern"}, 400, "cluster"),
        ("member", {"gpus_per_node": 8}, 400, "gpus_per_node"),
        ("member", {"time_limit": "13:00:00"}, 400, "time_limit"),
    ],
)
def test_refusals_name_what_to_change_and_ask_slurm_nothing(
    cluster, tokens: Tokens, who: str, change: dict, status: int, field: str | None
) -> None:
    factories.cluster("bern")  # exists, but the project's quota does not name it
    before = stats.commands + stats.connects
    answer = _ask(getattr(tokens, who), **change)
    assert answer.status_code == status, answer.content
    if field:
        assert field in answer.json(), answer.json()
    assert stats.commands + stats.connects == before


def test_an_unreachable_cluster_is_a_problem_per_option_and_nothing_is_submitted(
    cluster, tokens: Tokens
) -> None:
    cluster.ssh_host, cluster.ssh_port = "127.0.0.1", 1
    cluster.save(update_fields=["ssh_host", "ssh_port"])
    answer = _ask(tokens.member)
    assert answer.status_code == 200, answer.content
    options = answer.json()["options"]
    assert [o["label"] for o in options] == [
        "As chosen",
        "1 GPU per node instead of 2",
        "Time limit 20 min instead of 40 min",
    ]
    assert all(o["problem"].startswith("alps did not answer") for o in options)
    assert all(o["expected_at"] is None for o in options)
    assert not Job.objects.exists()
    assert all(o["line"] == "" for o in options)  # the project has room


def test_an_option_over_the_projects_gpus_at_once_says_it_waits_in_line_first(
    cluster, project, tokens: Tokens, no_submission
) -> None:
    Quota.objects.filter(project=project).update(max_concurrent_gpus=3)
    submitted = bearer(tokens.member).post(
        "/api/v1/jobs/", json.dumps(SPEC), content_type="application/json"
    )
    assert submitted.status_code == 201, submitted.content  # it holds 2 GPUs
    cluster.ssh_host, cluster.ssh_port = "127.0.0.1", 1
    cluster.save(update_fields=["ssh_host", "ssh_port"])
    options = {o["label"]: o for o in _ask(tokens.member).json()["options"]}
    assert options["As chosen"]["line"] == (
        "project vision has 2 of its 3 concurrent GPUs in use and this job needs 2"
    )
    assert options["1 GPU per node instead of 2"]["line"] == ""
