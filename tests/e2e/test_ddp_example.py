"""examples/ddp_train.py as a real 2-node DDP job on the sandbox: sbatch, srun, torchrun, gloo."""

import re
import shlex
import time
from pathlib import Path

import pytest
from django.conf import settings

from clusters.models import Cluster
from clusters.sandbox import pyenv
from clusters.sandbox.config import Paths
from clusters.ssh import Connection
from tests.helpers import slurm_name

pytestmark = pytest.mark.sandbox

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
DONE = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")

# What the portal renders: one torchrun per node, c10d rendezvous on the first node
# (the sandbox's nodes all resolve to 127.0.0.1, through /etc/hosts).
BATCH = """#!/bin/bash
#SBATCH --job-name={name}
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=1
#SBATCH --time=00:03:00
#SBATCH --output=stdout.log
set -euo pipefail
export PORTAL_RUN_DIR="$HOME/portal-runs/{name}"
export PORTAL_CHECKPOINT_DIR="$PORTAL_RUN_DIR/checkpoints"
export PORTAL_RESUME_FROM=""
export PORTAL_METRICS_FILE="$PORTAL_RUN_DIR/metrics.jsonl"
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_ADDR
export MASTER_PORT=$((15000 + SLURM_JOB_ID % 15000))
mkdir -p "$PORTAL_CHECKPOINT_DIR"
cd "$PORTAL_RUN_DIR"
srun torchrun --nnodes="$SLURM_NNODES" --nproc_per_node=1 \\
    --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" --rdzv_id="$SLURM_JOB_ID" \\
    ddp_train.py --steps 20 --checkpoint-every 10 --keep 3 --batch-size 32
"""


def _state(conn: Connection, job_id: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    state = ""
    while time.monotonic() < deadline:
        match = re.search(r"\bJobState=(\S+)", conn.run(f"scontrol -o show job {job_id}").text)
        state = match[1] if match else state
        if state in DONE:
            return state
        time.sleep(1)
    return f"still {state or 'unknown'} after {timeout:.0f} s"


def test_two_node_ddp_job_trains_and_checkpoints(
    alice: Connection, sandbox_cluster: Cluster
) -> None:
    if not pyenv.ready(Paths.of(settings.SANDBOX_STATE_DIR)):
        pytest.skip(f"job python: {pyenv.describe(Paths.of(settings.SANDBOX_STATE_DIR))}")
    name = slurm_name("e2e-ddp")
    run_dir = f"portal-runs/{name}"  # relative to alice's home, where ssh and sftp start
    q = shlex.quote
    alice.run(f"mkdir -p -m 700 {q(run_dir)}")
    job_id = ""
    try:
        alice.upload(f"{run_dir}/ddp_train.py", SCRIPT.read_bytes(), mode=0o600)
        alice.upload(f"{run_dir}/job.sbatch", BATCH.format(name=name).encode(), mode=0o600)
        submitted = alice.run(f"cd {q(run_dir)} && sbatch --parsable job.sbatch")
        assert submitted.exit_status == 0, submitted.error_text
        job_id = submitted.text.strip().split(";")[0]
        assert job_id.isdigit(), submitted.text

        state = _state(alice, job_id, timeout=120)
        output = alice.run(f"cat {q(run_dir)}/stdout.log").text
        assert state == "COMPLETED", f"job {job_id}: {state}\n{output[-4000:]}"

        assert "world_size=2 backend=gloo" in output, output
        steps = [int(s) for s in re.findall(r"^step (\d+), loss=\d+\.\d+", output, re.M)]
        assert steps == list(range(1, 21)), output
        listing = alice.run(f"ls -A {q(run_dir)}/checkpoints").text.split()
        assert sorted(listing) == ["step-10.pt", "step-20.pt"]
        metrics = alice.run(f"wc -l < {q(run_dir)}/metrics.jsonl").text.strip()
        assert metrics == "20"
        assert alice.run(f"stat -c %a {q(run_dir)}").text.strip() == "700"
    finally:
        if job_id:
            alice.run(f"scancel {job_id}")
        alice.run(f"rm -rf {q(run_dir)}")
