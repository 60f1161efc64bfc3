"""The example DDP trainer as a real 2-node job, submitted through the portal's torchrun template."""

import re
import shlex

import pytest

from jobs.models import Attempt, State
from monitoring.series import series_names, series_read
from tests.helpers import submit_ddp_example, wait_for

pytestmark = pytest.mark.sandbox


def test_ddp_example_trains_on_two_nodes(
    celery_worker, researcher, project, sandbox_cluster, alice
) -> None:
    job = submit_ddp_example(
        alice,
        researcher,
        project,
        sandbox_cluster,
        name="ddp example",
        args="--steps 30 --checkpoint-every 10",
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
    names = set(series_names(attempt_id=attempt.pk))
    assert {"loss", "samples"} <= names
    # Each node's GPU, whichever index Slurm gave the job (other jobs may hold GPU 0).
    for node in ("n1", "n2"):
        assert any(re.fullmatch(rf"gpu/{node}/[01]/utilization", name) for name in names), names
    listing = alice.run(f"ls {shlex.quote(attempt.run_dir + '/checkpoints')}").text.split()
    assert "step-30.pt" in listing
