"""The example DDP trainer as a real 2-node job, submitted through the portal's torchrun template."""

import re
import shlex
from pathlib import Path

import pytest

from jobs.models import Attempt, State, Template
from jobs.services import job_submit
from monitoring.series import series_names, series_read
from tests.e2e.conftest import wait_for
from tests.jobs.factories import spec

pytestmark = pytest.mark.sandbox

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"


def test_ddp_example_trains_on_two_nodes(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    if alice.run("command -v torchrun").exit_status != 0:
        pytest.skip("the sandbox's job environment has no PyTorch (`manage.py sandbox status`)")
    alice.run("mkdir -p -m 700 portal-examples")
    alice.upload("portal-examples/ddp_train.py", EXAMPLE.read_bytes(), mode=0o600)
    job = job_submit(
        user=researcher,
        project=project,
        cluster=sandbox_cluster,
        spec=spec(
            name="ddp example",
            template=Template.TORCHRUN,
            command="portal-examples/ddp_train.py --steps 30 --checkpoint-every 10",
            nodes=2,
            gpus_per_node=1,
        ),
    )
    wait_for(
        lambda: Attempt.objects.get(job=job).files_complete,
        180,
        "the DDP job to finish",
    )
    attempt = Attempt.objects.get(job=job)
    log = alice.run(f"cat {shlex.quote(attempt.run_dir + '/stdout.log')}").text
    assert attempt.state == State.COMPLETED, log[-3000:]
    assert attempt.node_list == "n[1-2]"
    assert "world_size=2" in log
    losses = [float(x) for x in re.findall(r"step \d+, loss=([0-9.]+)", log)]
    assert len(losses) >= 3 and losses[-1] < losses[0]
    # The loss comes from metrics.jsonl alone (stdout repeats it rounded): one value per step.
    loss = series_read(attempt_id=attempt.pk, name="loss")
    assert loss.xs == [float(step) for step in range(1, 31)]
    assert set(series_names(attempt_id=attempt.pk)) >= {"loss", "samples", "gpu/n1/0/utilization"}
    listing = alice.run(f"ls {shlex.quote(attempt.run_dir + '/checkpoints')}").text.split()
    assert "step-30.pt" in listing
