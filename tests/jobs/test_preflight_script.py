"""The preflight in the batch script, and the on-cluster check it runs: GPUs read from the
sandbox's stand-in nvidia-smi (the real format), an all-reduce between two processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from jobs.enums import Template
from jobs.preflight import preflight_report
from jobs.rundir import PREFLIGHT_EXIT, PREFLIGHT_SCRIPT
from jobs.scripts import RunDir, render_batch_script
from monitoring.on_cluster import portal_preflight
from tests import factories

ROOT = Path(__file__).resolve().parents[2]
CHECK = ROOT / "monitoring" / "on_cluster" / "portal_preflight.py"
STAND_IN = ROOT / "clusters" / "sandbox" / "nvidia_smi.py"
FIELDS = portal_preflight.GPU_FIELDS

# `nvidia-smi --query-gpu=index,uuid,ecc.errors.uncorrected.volatile.total,
# retired_pages.pending --format=csv,noheader,nounits`, as printed: an H200 (no pages to
# retire), one of its GPUs with uncorrected errors; an A100 with a page waiting; a V100
# whose field is not supported.
H200_FAULTY = (
    "0, GPU-ce8b1d64-c58a-12b5-f042-642bee491176, 0, [N/A]\n"
    "1, GPU-2e8c4d9d-3ef0-b938-0df6-6d3dd8d88600, 31582503, [N/A]\n"
)
A100_PENDING = "0, GPU-5f1c2d7e-2a41-9e55-0c1d-8d3b2f7a9e10, 0, Yes\n"
V100_UNSUPPORTED = "0, GPU-0b6e3f8a-7c2d-11e9-a3b4-5e6f7a8b9c0d, [Not Supported], [N/A]\n"


def _render(member, project, **overrides: object) -> str:
    job, attempt = factories.job(project, member, factories.cluster(), **overrides)
    return render_batch_script(job=job, attempt=attempt, run_dir=RunDir("/home/mia/runs/r"))


def test_no_preflight_unless_the_job_asks(member, project) -> None:
    script = _render(member, project, template=Template.TORCHRUN, nodes=2)
    assert PREFLIGHT_SCRIPT not in script
    assert f"-eq {PREFLIGHT_EXIT}" not in script


def test_the_preflight_runs_on_each_node_before_any_of_the_jobs_code(member, project) -> None:
    script = _render(
        member,
        project,
        template=Template.TORCHRUN,
        nodes=2,
        gpus_per_node=2,
        setup="source venv/bin/activate",
        preflight=True,
    )
    lines = script.splitlines()
    check = next(i for i, line in enumerate(lines) if "srun --ntasks-per-node=1 --mem=0" in line)
    assert lines[check].startswith("timeout ")  # srun itself cannot hang the job
    assert "PORTAL_PREFLIGHT_GPUS=2 python3 -I" in lines[check + 1]
    merge = next(i for i, line in enumerate(lines) if " merge " in line)
    failed_exit = lines.index(f"  exit {PREFLIGHT_EXIT}")
    assert check < merge < failed_exit
    # Nothing of the job's runs before: its set-up, its command, the GPU sampler.
    for later in ("source venv/bin/activate", "portal-launch torchrun", "nvidia-smi --query"):
        assert failed_exit < next(i for i, line in enumerate(lines) if later in line)
    # The command's own exit with the preflight's status is not the preflight's.
    assert f'[ "$portal_code" -eq {PREFLIGHT_EXIT} ] && portal_code=1' in lines
    subprocess.run(["bash", "-n"], input=script.encode(), check=True)


def test_the_check_is_shipped_with_the_run_directory() -> None:
    assert Path(settings.RUN_DIR_FILES[PREFLIGHT_SCRIPT]) == CHECK


@pytest.mark.parametrize(
    ("output", "expected", "faults"),
    [
        (H200_FAULTY, 2, ["GPU 1: 31582503 uncorrected ECC errors"]),
        (A100_PENDING, 1, ["GPU 0: pages waiting to be retired (reset the GPU)"]),
        (V100_UNSUPPORTED, 1, []),
        (H200_FAULTY.splitlines()[0] + "\n", 2, ["1 of 2 GPUs answer"]),
    ],
)
def test_gpu_faults_from_nvidia_smi(output: str, expected: int, faults: list[str]) -> None:
    assert portal_preflight.gpu_faults(output, FIELDS, expected) == faults


def _shim(tmp_path: Path) -> Path:
    """A bin directory whose nvidia-smi is the sandbox's stand-in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "nvidia-smi"
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} {STAND_IN} "$@"\n')
    shim.chmod(0o755)
    return bin_dir


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_two_nodes_check_and_the_faulty_one_is_named(tmp_path: Path) -> None:
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"n2": {"uncorrected_every_s": 1.0, "since": 1.0}}))
    out = tmp_path / "preflight"
    out.mkdir()
    port = _free_port()
    base = {
        "PATH": f"{_shim(tmp_path)}:{os.environ['PATH']}",
        "PORTAL_FAKE_NVSMI_FAULTS": str(faults),
        "PORTAL_PREFLIGHT_GPUS": "2",
        "SLURM_NTASKS": "2",
        "SLURM_JOB_GPUS": "0,1",
        "MASTER_ADDR": "127.0.0.1",
    }
    ranks = [
        subprocess.Popen(
            [sys.executable, "-I", str(CHECK), "check", str(out), str(port), "20"],
            env={**base, "SLURMD_NODENAME": node, "SLURM_PROCID": str(rank)},
        )
        for rank, node in enumerate(["n1", "n2"])
    ]
    assert [p.wait(timeout=60) for p in ranks] == [0, 1]
    merged = subprocess.run(
        [sys.executable, "-I", str(CHECK), "merge", str(out), "20", "n1,n2,n3"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert merged.returncode == 1
    result = json.loads(merged.stdout)
    assert result["nodes"]["n1"]["ok"] is True
    assert result["nodes"]["n1"]["collective"]["backend"] in ("tcp", "gloo")
    assert result["nodes"]["n2"]["collective"]["ok"] is True  # its network is fine
    report = preflight_report(merged.stdout, ["n1", "n2", "n3"])
    assert list(report.faulty) == ["n2", "n3"]
    assert report.faulty["n2"].startswith("GPU 0: ")
    assert "uncorrected ECC errors; GPU 1: " in report.faulty["n2"]
    assert report.faulty["n3"] == "no answer from the node within the preflight's time"


def test_an_all_reduce_nobody_joins_times_out(tmp_path: Path) -> None:
    result = portal_preflight.collective_check("127.0.0.1", _free_port(), 0, 2, 1.0)
    assert result["ok"] is False
    assert result["reason"].startswith("all_reduce of 2 nodes failed: ")
