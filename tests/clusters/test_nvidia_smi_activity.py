"""The stand-in nvidia-smi's utilisation rule: a GPU is as busy as the processes bound to it.

Real processes, bound the way Slurm binds a job step (SLURMD_NODENAME, SLURM_JOB_ID,
SLURM_JOB_GPUS / SLURM_STEP_GPUS, LOCAL_RANK for a torchrun worker), read by the
stand-in from /proc between two samples.
"""

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from clusters.sandbox.nvidia_smi import bound_gpus, utilization_percent
from tests.clusters.test_nvidia_smi_standin import MONITOR_FIELDS, MONITOR_LINE, nvsmi

# A node name no sandbox job and no other test process uses (tests run side by side).
NODE = f"n-activity-{uuid.uuid4().hex[:8]}"


@contextmanager
def bound_process(code: str, **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """A process bound to the node's GPUs as `env` says, yielded once it runs `code`: its
    interpreter's start-up (seconds on a busy machine) is no part of a measured window."""
    environ = {**os.environ, "SLURMD_NODENAME": NODE, "SLURM_JOB_ID": "4242", **env}
    started = "import sys; sys.stdout.write('started\\n'); sys.stdout.flush()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", started + code], env=environ, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=10)


def utilisation(*extra: str) -> dict[int, int]:
    proc = nvsmi(
        "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits", *extra, node=NODE
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line.split(", ") for line in proc.stdout.splitlines()]
    return {int(index): int(util) for index, util in lines}


def test_a_computing_process_makes_its_gpu_busy_and_a_sleeping_one_leaves_it_idle():
    spin = "import time\nend = time.time() + 30\nwhile time.time() < end: pass"
    with (
        bound_process(spin, SLURM_JOB_GPUS="1"),
        bound_process("import time; time.sleep(30)", SLURM_JOB_GPUS="0"),
    ):
        # The first line measures a short window; -l lines measure the interval.
        first = utilisation()
        assert first[1] >= 80, first  # runnable all the time, however busy the machine
        assert first[0] <= 5, first
        proc = nvsmi(f"--query-gpu={MONITOR_FIELDS}", "--format=csv,noheader,nounits", node=NODE)
        lines = proc.stdout.splitlines()
        assert all(MONITOR_LINE.match(line) for line in lines), lines  # still the real format
        busy, idle = (MONITOR_LINE.match(line) for line in reversed(lines))
        assert busy is not None and idle is not None
        assert float(busy["power"]) > float(idle["power"]) + 100
        assert int(idle["used"]) > 0  # a sleeping process still holds its memory


def test_an_unbound_gpu_reads_zero_like_a_free_gpu():
    assert utilisation() == {0: 0, 1: 0}
    proc = nvsmi("--query-gpu=memory.used", "--format=csv,noheader,nounits", node=NODE)
    assert proc.stdout.split() == ["0", "0"]


def test_binding_follows_slurm_gpu_variables_node_and_local_rank():
    job = {"SLURMD_NODENAME": "n1", "SLURM_JOB_ID": "7"}
    assert bound_gpus({**job, "SLURM_JOB_GPUS": "0,1"}, "n1") == [0, 1]
    assert bound_gpus({**job, "SLURM_STEP_GPUS": "1", "SLURM_JOB_GPUS": "0,1"}, "n1") == [1]
    assert bound_gpus({**job, "CUDA_VISIBLE_DEVICES": "1"}, "n1") == [1]
    # A torchrun worker computes on its own GPU of the job's.
    assert bound_gpus({**job, "SLURM_JOB_GPUS": "0,1", "LOCAL_RANK": "1"}, "n1") == [1]
    assert bound_gpus({**job, "SLURM_JOB_GPUS": "0,1"}, "n2") == []  # the other node's
    assert bound_gpus({"SLURMD_NODENAME": "n1", "SLURM_JOB_GPUS": "0"}, "n1") == []  # no job
    assert bound_gpus({**job, "SLURM_JOB_GPUS": "garbage"}, "n1") == []


def test_utilisation_is_the_busy_share_capped():
    assert utilization_percent(0.0) == 0
    assert utilization_percent(0.004) == 0
    assert utilization_percent(0.5) == 50
    assert utilization_percent(3.2) == 100  # a multi-threaded process on one GPU
