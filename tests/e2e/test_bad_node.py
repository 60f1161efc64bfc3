"""A faulty node on the sandbox: the ledger judges it bad, later submissions avoid it.

Node n2 is made faulty through its stand-in GPUs: their uncorrected ECC count grows
every second (the stand-in's faults file, for this test's jobs only), so the GPU samples
of each job there show it rise, and each job placed there prints the line PyTorch prints
when a GPU has an uncorrectable ECC error and exits 1, as a job on a failing GPU does; on
n1 and n3 the same job runs to its end. Each job takes a whole node (both of its GPUs), so
jobs keep landing on n2 as it frees at once. After the configured number of faulty jobs
(from two people's jobs: with the default weights, two) n2 is bad: jobs handed to Slurm
from then on, and a restart, carry `--exclude=n2` and run on the others, and no healthy
node is blamed.
"""

import math
import re
import shlex
import time
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from clusters.avoidance import avoided_nodes
from clusters.sandbox.config import Paths
from clusters.sandbox.nvidia_smi_faults import faults_written
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, Job
from jobs.services import job_submit
from monitoring.models import NodeEvent, NodeHealth
from projects.models import Membership
from tests.factories import spec
from tests.helpers import run_file, wait_for, worker_tag

pytestmark = pytest.mark.sandbox

FAULTY = "n2"
ECC_ERROR = "RuntimeError: CUDA error: uncorrectable ECC error encountered"
# Faulty jobs run a few seconds first, as a job does before it touches the bad memory: the
# sampler's lines show the count rise meanwhile.
COMMAND = (
    f'if [ "$SLURMD_NODENAME" = {FAULTY} ]; then sleep 4; echo {shlex.quote(ECC_ERROR)} >&2;'
    " exit 1; fi\nsleep 4\necho trained"
)
# A restart's first attempt fails as a crashed rank does (no node's fault), anywhere.
RESTARTED = (
    'if [ "$PORTAL_ATTEMPT_NUMBER" = 1 ]; then'
    ' echo "srun: error: $SLURMD_NODENAME: task 0: Exited with exit code 1" >&2; exit 1; fi\n'
    "sleep 4\necho trained"
)
LIVE = (State.QUEUED, State.WAITING, State.SUBMITTING, State.PENDING, State.RUNNING)


def _submit(user, project, cluster, name: str, command: str = COMMAND, restarts: int = 0) -> Job:
    return job_submit(
        user=user,
        project=project,
        cluster=cluster,
        spec=spec(
            name=name,
            template=Template.COMMAND,
            command=command,
            gpus_per_node=2,
            max_restarts=restarts,
        ),
    )


@pytest.fixture
def faulty_gpus(sandbox_cluster) -> Iterator[None]:
    """n2's GPUs count an uncorrected ECC error a second, for this test's jobs only."""
    entry = {"uncorrected_every_s": 1.0, "since": time.time()}
    entry["under"] = sandbox_cluster.base_run_dir
    script_dir = Paths.of(settings.SANDBOX_STATE_DIR).bin
    with faults_written(script_dir, f"bad-node-{worker_tag()}", {FAULTY: entry}):
        yield


def _events_to_bad() -> int:
    """How many faulty jobs make a node bad at the settings: each a CUDA error and an ECC rise."""
    weights = settings.NODE_SIGNAL_WEIGHTS
    each = weights["gpu_hardware"] + weights["gpu_ecc"]
    return max(math.ceil(settings.NODE_BAD_SCORE / each), settings.NODE_BAD_MIN_USERS)


def _faults(jobs: list[Job], user: User) -> int:
    """How many of `user`'s jobs among `jobs` failed on the faulty node."""
    return Attempt.objects.filter(
        job__in=jobs, job__user=user, node_list=FAULTY, state=State.FAILED
    ).count()


def _ended(jobs: list[Job]) -> bool:
    return not Attempt.objects.filter(job__in=jobs, files_complete=False).exists() and not (
        Attempt.objects.filter(job__in=jobs, state__in=LIVE).exists()
    )


# Its jobs take whole nodes and must land on n2 again and again: beside other tests' jobs,
# which Slurm packs onto n2's free GPU, none did in 24 (a CI run's log).
@pytest.mark.sandbox_exclusive
@pytest.mark.timeout(900)  # up to 240 s of faults, then the later jobs, on a busy sandbox
def test_a_faulty_node_is_judged_bad_and_later_jobs_run_elsewhere(
    celery_worker, researcher, project, sandbox_cluster, faulty_gpus
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
            user = min(
                people,
                key=lambda p: (_faults(first, p), sum(j.user_id == p.pk for j in first)),
            )
            first.append(_submit(user, project, sandbox_cluster, f"fault {len(first)}"))
        time.sleep(0.5)
    wait_for(lambda: _ended(first), 180, "the first jobs to end")

    health = {h.node: h for h in NodeHealth.objects.filter(cluster=sandbox_cluster)}
    assert health[FAULTY].verdict == "bad"
    blamed = NodeEvent.objects.filter(cluster=sandbox_cluster, weight__gt=0)
    assert set(blamed.values_list("node", "kind")) == {
        (FAULTY, "gpu_hardware"),
        (FAULTY, "gpu_ecc"),
    }
    for attempt in Attempt.objects.filter(job__in=first):
        kinds = set(NodeEvent.objects.filter(attempt=attempt).values_list("kind", flat=True))
        if attempt.node_list == FAULTY:  # its CUDA error and the ECC rise in its samples
            assert attempt.failure_class == FailureClass.GPU_HARDWARE
            assert kinds == {"gpu_hardware", "gpu_ecc"}, attempt.pk
        else:  # jobs on healthy nodes are never blamed
            assert attempt.state == State.COMPLETED, attempt.reason
            assert kinds == {"healthy"}, attempt.pk
    assert all(h.verdict == "healthy" for n, h in health.items() if n != FAULTY)
    # Bad after the configured number of faulty jobs: the period's reason counts them.
    reason = avoided_nodes(cluster=sandbox_cluster)[FAULTY].reason
    found = re.findall(r"(\d+) x ([A-Za-z ]+?)(?:,|$)", reason.split(": ", 1)[1])
    counts = {label: int(n) for n, label in found}
    assert set(counts) == {"GPU hardware fault", "Uncorrected ECC errors"}, reason
    assert counts["GPU hardware fault"] == counts["Uncorrected ECC errors"]
    assert counts["GPU hardware fault"] >= _events_to_bad()

    # Phase 2: every job handed to Slurm now leaves n2 out and completes elsewhere, a
    # restart too.
    later = [_submit(researcher, project, sandbox_cluster, f"after {i}") for i in range(3)]
    later.append(_submit(bob, project, sandbox_cluster, "restarted", RESTARTED, restarts=1))
    wait_for(lambda: _ended(later), 240, "the later jobs to end")
    restarted = Attempt.objects.filter(job=later[-1]).order_by("number")
    assert [a.number for a in restarted] == [1, 2]
    assert restarted[0].failure_class == FailureClass.RANK_CRASH  # no node's fault
    assert not NodeEvent.objects.filter(attempt=restarted[0]).exists()
    for attempt in Attempt.objects.filter(job__in=later):
        if attempt.pk != restarted[0].pk:
            assert attempt.state == State.COMPLETED, attempt.reason
        assert attempt.excluded_nodes == FAULTY
        assert attempt.node_list not in ("", FAULTY)
        assert f"#SBATCH --exclude={FAULTY}" in run_file(attempt, "job.sbatch")

    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{later[0].pk}/").content.decode()
    assert f"ran without node <strong>{FAULTY}</strong>: judged bad" in page
