"""A faulty node on the sandbox: the ledger judges it bad, later submissions avoid it.

Node n2 is made faulty through the jobs placed on it: each prints the line PyTorch
prints when a GPU has an uncorrectable ECC error and exits 1, as a job on a failing GPU
does; on n1 and n3 the same job runs to its end. Each job takes a whole node (both of its
GPUs), so jobs keep landing on n2 as it frees at once. After the configured number of
faults (three at the default weights and thresholds, from two people's jobs) n2 is
bad: jobs handed to Slurm from then on carry `--exclude=n2` and run on the others, and no healthy node is blamed.
"""

import shlex
import time

import pytest
from django.contrib.auth.models import User
from django.test import Client

from clusters.avoidance import avoided_nodes
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.models import NodeEvent, NodeHealth
from projects.models import Membership
from tests.factories import spec
from tests.helpers import run_file, wait_for

pytestmark = pytest.mark.sandbox

FAULTY = "n2"
ECC_ERROR = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
COMMAND = (
    f'if [ "$SLURMD_NODENAME" = {FAULTY} ]; then echo {shlex.quote(ECC_ERROR)} >&2; exit 1; fi\n'
    "sleep 4\necho trained"
)
LIVE = (State.QUEUED, State.WAITING, State.SUBMITTING, State.PENDING, State.RUNNING)


def _submit(user, project, cluster, name: str) -> Job:
    return job_submit(
        user=user,
        project=project,
        cluster=cluster,
        spec=spec(name=name, template=Template.COMMAND, command=COMMAND, gpus_per_node=2),
    )


def _faults(jobs: list[Job], user: User) -> int:
    """How many of `user`'s jobs among `jobs` failed on the faulty node."""
    return Attempt.objects.filter(
        job__in=jobs, job__user=user, node_list=FAULTY, state=State.FAILED
    ).count()


def _ended(jobs: list[Job]) -> bool:
    return not Attempt.objects.filter(job__in=jobs, files_complete=False).exists() and not (
        Attempt.objects.filter(job__in=jobs, state__in=LIVE).exists()
    )


@pytest.mark.timeout(900)  # up to 240 s of faults, then the later jobs, on a busy sandbox
def test_a_faulty_node_is_judged_bad_and_later_jobs_run_elsewhere(
    celery_worker, researcher, project, sandbox_cluster
) -> None:
    # Two people's jobs (one person's alone never make a node bad: NODE_BAD_MIN_USERS).
    bob = User.objects.get(username="bob")
    Membership.objects.create(user=bob, project=project, role=Membership.Role.MEMBER)
    people = (researcher, bob)
    # Phase 1: jobs until n2 is bad, at most 24, four in flight (the project's 8 GPUs).
    # Slurm decides where each lands: the next job is the person's with fewer faults on
    # n2 so far, so that both people's jobs meet it whatever the placement.
    first: list[Job] = []
    deadline = time.monotonic() + 240
    while FAULTY not in avoided_nodes(cluster=sandbox_cluster):
        assert time.monotonic() < deadline, "n2 was never judged bad"
        live = Attempt.objects.filter(job__in=first, state__in=LIVE).count()
        if live < 4 and len(first) < 24:
            user = min(people, key=lambda person: _faults(first, person))
            first.append(_submit(user, project, sandbox_cluster, f"fault {len(first)}"))
        time.sleep(0.5)
    wait_for(lambda: _ended(first), 180, "the first jobs to end")

    health = {h.node: h for h in NodeHealth.objects.filter(cluster=sandbox_cluster)}
    assert health[FAULTY].verdict == "bad"
    blamed = NodeEvent.objects.filter(cluster=sandbox_cluster, weight__gt=0)
    assert set(blamed.values_list("node", "kind")) == {(FAULTY, "gpu_hardware")}
    assert blamed.count() >= 3
    for attempt in Attempt.objects.filter(job__in=first):
        if attempt.node_list == FAULTY:
            assert attempt.failure_class == FailureClass.GPU_HARDWARE
        else:  # jobs on healthy nodes are never blamed
            assert attempt.state == State.COMPLETED, attempt.reason
    assert all(h.verdict == "healthy" for n, h in health.items() if n != FAULTY)

    # Phase 2: every job handed to Slurm now leaves n2 out and completes elsewhere.
    later = [_submit(researcher, project, sandbox_cluster, f"after {i}") for i in range(3)]
    wait_for(lambda: _ended(later), 180, "the later jobs to end")
    for attempt in Attempt.objects.filter(job__in=later):
        assert attempt.state == State.COMPLETED, attempt.reason
        assert attempt.excluded_nodes == FAULTY
        assert attempt.node_list not in ("", FAULTY)
        assert f"#SBATCH --exclude={FAULTY}" in run_file(attempt, "job.sbatch")

    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{later[0].pk}/").content.decode()
    assert f"ran without node <strong>{FAULTY}</strong>: judged bad" in page
