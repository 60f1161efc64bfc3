"""A 2-node DDP job with preflight on an allocation with a faulty node, on the sandbox.

Node n2's GPUs report uncorrected ECC errors through the stand-in nvidia-smi (its faults
file, `clusters.sandbox.nvidia_smi_faults`). The job (examples/ddp_train.py under torchrun,
gloo) lands on n1 and n2 of the idle sandbox; its preflight finds n2 faulty before the
command starts, so the command never runs there; the portal records n2 in the node ledger,
submits the job again without it (no restart used), and it trains to its end on n1 and n3.
"""

import json
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from clusters.sandbox.config import Paths
from clusters.sandbox.nvidia_smi_faults import FAULTS_FILE
from clusters.slurm.hostlist import expand_nodes
from jobs.enums import FailureClass, State, Template
from jobs.models import Attempt, JobEvent
from jobs.rundir import PREFLIGHT_EXIT, PREFLIGHT_FILE, STDOUT_FILE, WORKDIR_FILE
from jobs.services import job_submit
from monitoring.diagnosis.preflight import preflight_nodes
from monitoring.models import NodeEvent, NodeSignal
from tests.factories import spec
from tests.helpers import run_file, wait_for

# The job must find the sandbox idle to be placed on n1 and n2: no other sandbox test
# runs meanwhile.
pytestmark = [pytest.mark.sandbox, pytest.mark.sandbox_exclusive]

FAULTY = "n2"
STEPS = 6


@pytest.fixture
def faulty_n2(sandbox_cluster):
    """n2's GPUs with uncorrected ECC errors from a minute ago on, for this test's jobs only,
    removed whatever happens."""
    path = Path(Paths.of(settings.SANDBOX_STATE_DIR).bin) / FAULTS_FILE
    entry = {"uncorrected_every_s": 1.0, "since": time.time() - 60}
    entry["under"] = sandbox_cluster.base_run_dir  # this test's jobs only
    path.write_text(json.dumps({FAULTY: entry}))
    path.chmod(0o644)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.timeout(420)
def test_preflight_finds_the_faulty_node_and_the_job_runs_on_healthy_ones(
    celery_worker, researcher, project, sandbox_cluster, example_trainer, faulty_n2
) -> None:
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="ddp with preflight",
            template=Template.TORCHRUN,
            command=f"{example_trainer} --steps {STEPS} --checkpoint-every 3",
            nodes=2,
            gpus_per_node=1,
            preflight=True,
        ),
    )
    first = Attempt.objects.get(job=job, number=1)
    wait_for(
        lambda: (
            Attempt.objects.filter(job=job, number=2).exists()
            or Attempt.objects.get(pk=first.pk).diagnosed_at is not None
        ),
        180,
        "the first attempt's preflight to end it",
    )
    first.refresh_from_db()
    placed = expand_nodes(first.node_list)
    assert FAULTY in placed, f"the idle sandbox placed the job on {placed}, not on {FAULTY}"

    # Found before the user's command started: it never ran on that allocation.
    assert first.state == State.FAILED and first.exit_code == PREFLIGHT_EXIT, first.reason
    assert first.failure_class == FailureClass.PREFLIGHT
    found = preflight_nodes(first.diagnosis)
    assert list(found) == [FAULTY] and "uncorrected ECC errors" in found[FAULTY]
    log = run_file(first, STDOUT_FILE)
    assert "portal: preflight found a faulty node" in log
    assert "world_size=" not in log and "step 1," not in log, log[-3000:]
    assert run_file(first, WORKDIR_FILE) == ""  # written as the command starts: never
    result = json.loads(run_file(first, PREFLIGHT_FILE))
    healthy = [n for n in result["nodes"] if n != FAULTY]
    assert all(result["nodes"][n]["ok"] for n in healthy), result

    # Recorded in the ledger with the attempt as evidence; the healthy node is not blamed.
    wait_for(
        lambda: NodeEvent.objects.filter(attempt=first, kind=NodeSignal.PREFLIGHT).exists(),
        60,
        "the ledger's preflight signal",
    )
    blamed = NodeEvent.objects.filter(attempt=first, weight__gt=0)
    assert list(blamed.values_list("node", "kind")) == [(FAULTY, NodeSignal.PREFLIGHT)]

    # Submitted again without n2, not as a restart (the job allows none), and completed.
    wait_for(
        lambda: (
            Attempt.objects.filter(job=job, number=2, state=State.COMPLETED).exists()
            or Attempt.objects.filter(job=job, number=2, state=State.FAILED).exists()
        ),
        240,
        "the second attempt to end",
    )
    second = Attempt.objects.get(job=job, number=2)
    assert second.state == State.COMPLETED, f"{second.reason}\n{run_file(second, STDOUT_FILE)}"
    assert second.excluded_nodes == FAULTY and second.preflight_resubmits == 1
    assert FAULTY not in expand_nodes(second.node_list) and second.node_list
    assert f"#SBATCH --exclude={FAULTY}" in run_file(second, "job.sbatch")
    output = run_file(second, STDOUT_FILE)
    assert "portal: preflight passed on 2 node(s)" in output
    assert "world_size=2 backend=gloo" in output
    event = JobEvent.objects.get(attempt=second, from_state="")
    assert event.reason.startswith(f"Preflight found {FAULTY} faulty ({FAULTY}: GPU ")
    assert event.reason.endswith(
        "resubmitted without it (preflight resubmission 1 of at most 3, not a restart)."
    )

    client = Client()
    client.force_login(researcher)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f"Preflight found {FAULTY} faulty" in page
