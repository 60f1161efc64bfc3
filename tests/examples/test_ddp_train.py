"""examples/ddp_train.py for real: torchrun, 2 processes, gloo on CPU, the sandbox's job python."""

import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from django.conf import settings

from clusters.sandbox import pyenv
from clusters.sandbox.config import Paths
from monitoring.ingest.parse import NewBytes, attempt_parse
from monitoring.models import AttemptIngest, LogFile
from monitoring.reading.throughput import COMPUTED_MFU
from tests import factories

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "ddp_train.py"
STEP_LINE = re.compile(r"^step (\d+), loss=(\d+\.\d{4}), tokens_per_sec=\d+\.\d$", re.MULTILINE)


@pytest.fixture(scope="module")
def job_bin() -> Path:
    """The sandbox's job python (bin dir), made here when we may (root), else skipped."""
    paths = Paths.of(settings.SANDBOX_STATE_DIR)
    if not pyenv.ready(paths) and os.geteuid() == 0:
        pyenv.ensure_pyenv(paths)  # a no-op once `sandbox up` made it
    if not pyenv.ready(paths):
        pytest.skip(
            f"the sandbox job python has no torch ({pyenv.describe(paths)}); "
            "run `manage.py sandbox up` as root first"
        )
    return paths.pyenv_bin


def _env(**extra: str) -> dict[str, str]:
    # Only what a job would have: no PORTAL_* or PYTHON* leaking in from this shell.
    keep = ("PATH", "HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    return env | extra


def _cmd(job_bin: Path, *args: str) -> list[str]:
    return [str(job_bin / "torchrun"), "--standalone", "--nproc_per_node=2", str(SCRIPT), *args]


def run(job_bin: Path, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """torchrun the example in `workdir`, the portal's files there; however it ends."""
    workdir.mkdir(parents=True, exist_ok=True)
    environ = _env(
        PORTAL_CHECKPOINT_DIR=str(workdir / "checkpoints"),
        PORTAL_METRICS_FILE=str(workdir / "metrics.jsonl"),
        **env,
    )
    return subprocess.run(
        _cmd(job_bin, *args),
        cwd=workdir,
        env=environ,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def train(job_bin: Path, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    proc = run(job_bin, workdir, *args, **env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def steps(output: str) -> dict[int, str]:
    return {int(step): loss for step, loss in STEP_LINE.findall(output)}


def metric_losses(workdir: Path) -> dict[int, float]:
    lines = (workdir / "metrics.jsonl").read_text().splitlines()
    return {record["step"]: record["loss"] for record in map(json.loads, lines)}


def files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


@pytest.fixture(scope="module")
def full_run(job_bin: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """An uninterrupted 20-step run, checkpoints every 5 steps, the last 2 kept."""
    workdir = tmp_path_factory.mktemp("full")
    args = ("--steps", "20", "--checkpoint-every", "5", "--keep", "2", "--batch-size", "32")
    return workdir, train(job_bin, workdir, *args).stdout


def test_trains_two_ranks_and_loss_decreases(full_run: tuple[Path, str]) -> None:
    workdir, out = full_run
    assert "world_size=2 backend=gloo" in out
    losses = steps(out)
    assert sorted(losses) == list(range(1, 21))
    first, last = [float(losses[s]) for s in (1, 2, 3)], [float(losses[s]) for s in (18, 19, 20)]
    assert sum(last) < 0.6 * sum(first), losses
    # The metrics file: one JSON line per step, the same losses at full precision.
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 21))
    node = next(k for k in records[0] if k.startswith("steps_per_sec/"))
    assert set(records[0]) == {"step", "loss", "samples", "tokens", "time", node}
    assert records[0][node] > 0
    assert records[-1]["samples"] == 20 * 32 * 2
    assert records[-1]["tokens"] == records[-1]["samples"]  # a token: one sample
    assert all(f"{r['loss']:.4f}" == losses[r["step"]] for r in records)


@pytest.mark.django_db
def test_its_output_gives_the_job_page_an_mfu(full_run: tuple[Path, str], project, owner) -> None:
    """Its tokens/s, with the model size it prints, is what the portal's MFU is computed from."""
    _, out = full_run
    params = int(re.search(r"params=(\d+)", out)[1])  # type: ignore[index]
    cluster = factories.cluster(gpu_peak_bf16_tflops=989.0)
    _, attempt = factories.job(project, owner, cluster, model_params=params, gpus_per_node=2)
    log_file = LogFile.objects.create(attempt=attempt, name="stdout.log")
    parsed = attempt_parse(
        attempt,
        {"stdout.log": log_file},
        {"stdout.log": NewBytes(0, out.encode())},
        final=False,
        note=AttemptIngest.objects.create(attempt=attempt),
    )
    names = {name for _, name, _, _ in parsed.points}
    assert {"tokens_per_sec", COMPUTED_MFU} <= names and "samples_per_sec" not in names
    mfus = [value for _, name, _, value in parsed.points if name == COMPUTED_MFU]
    assert mfus and all(0 < value < 1 for value in mfus)


def test_checkpoints_keep_the_last_k_and_leave_no_temp_files(full_run: tuple[Path, str]) -> None:
    workdir, out = full_run
    # Hidden temp files included: every write was renamed into place.
    assert files(workdir / "checkpoints") == ["step-15.pt", "step-20.pt"]
    saved = re.findall(r"^checkpoint (step-\d+\.pt) saved", out, re.MULTILINE)
    assert saved == ["step-5.pt", "step-10.pt", "step-15.pt", "step-20.pt"]


def test_a_failed_write_leaves_neither_a_partial_checkpoint_nor_a_temp_file(
    job_bin: Path, tmp_path: Path
) -> None:
    probe = f"""
import sys
sys.path.insert(0, {str(SCRIPT.parent)!r})
from pathlib import Path
import torch, ddp_train

def broken_save(obj, fh):
    fh.write(b"half a checkpoint")
    raise OSError("disk full")

directory = Path({str(tmp_path)!r})
ddp_train.save_checkpoint(directory, 1, {{"step": 1}}, keep=2)
torch.save = broken_save
try:
    ddp_train.save_checkpoint(directory, 2, {{"step": 2}}, keep=2)
except OSError as exc:
    print("failed:", exc)
"""
    proc = subprocess.run(
        [str(job_bin / "python"), "-c", probe],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "failed: disk full" in proc.stdout
    assert files(tmp_path) == ["step-1.pt"]


def test_resume_reproduces_the_uninterrupted_losses(
    job_bin: Path, full_run: tuple[Path, str], tmp_path: Path
) -> None:
    full_dir, full_out = full_run
    common = ("--checkpoint-every", "5", "--keep", "2", "--batch-size", "32")
    first = train(job_bin, tmp_path / "first", "--steps", "10", *common)
    assert sorted(steps(first.stdout)) == list(range(1, 11))
    checkpoint = tmp_path / "first" / "checkpoints" / "step-10.pt"
    assert checkpoint.is_file()

    resumed = train(
        job_bin, tmp_path / "resumed", "--steps", "20", *common, PORTAL_RESUME_FROM=str(checkpoint)
    )
    assert f"resumed from {checkpoint} at step 10" in resumed.stdout
    assert "start_step=11" in resumed.stdout
    expected = {step: loss for step, loss in steps(full_out).items() if step > 10}
    assert steps(resumed.stdout) == expected
    # Exactly, not only to four decimals.
    full_metrics = metric_losses(full_dir)
    assert metric_losses(tmp_path / "resumed") == {s: full_metrics[s] for s in range(11, 21)}


def _tree(root: int) -> list[int]:
    """root and all its descendants (torchrun puts each worker in a session of its own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            # Still one of ours (not a recycled pid)?
            if str(SCRIPT) in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                os.kill(pid, sig)
        except (FileNotFoundError, ProcessLookupError):
            pass


def test_sigusr1_checkpoints_and_exits_cleanly(job_bin: Path, tmp_path: Path) -> None:
    # Slurm's --signal=USR1@N reaches every process of the step (proctrack follows
    # the process tree, whatever the sessions). torchrun would die of it, so the
    # step ignores USR1 before exec'ing torchrun (as the batch script should); the
    # trainer installs its own handler.
    cmd = _cmd(job_bin, "--steps", "100000", "--sleep", "0.2", "--checkpoint-every", "0")
    proc = subprocess.Popen(
        ["bash", "-c", 'trap "" USR1; exec "$@"', "bash", *cmd],
        cwd=tmp_path,
        env=_env(PORTAL_CHECKPOINT_DIR=str(tmp_path / "checkpoints")),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in proc.stdout or ():
            lines.put(line)

    reader = threading.Thread(target=read)
    reader.start()
    seen: list[str] = []
    pids = [proc.pid]
    try:
        deadline = time.monotonic() + 60
        while not any(ln.startswith("step 3,") for ln in seen):
            assert time.monotonic() < deadline, "".join(seen)
            try:
                seen.append(lines.get(timeout=1))
            except queue.Empty:
                assert proc.poll() is None, "".join(seen)
        pids = _tree(proc.pid)
        _signal(pids, signal.SIGUSR1)
        assert proc.wait(timeout=120) == 0  # it stops by itself (a deadline, not a timing)
    finally:
        _signal([*pids, *(_tree(proc.pid) if proc.poll() is None else [])], signal.SIGKILL)
        proc.wait()
        reader.join(timeout=10)
    while not lines.empty():
        seen.append(lines.get())
    out = "".join(seen)
    last = max(steps(out))
    assert re.search(rf"^stopping after step {last} on SIGUSR1", out, re.MULTILINE), out
    assert f"checkpoint step-{last}.pt saved" in out
    assert files(tmp_path / "checkpoints") == [f"step-{last}.pt"]
    assert last < 100


def test_a_throttled_node_reports_its_own_slower_pace(job_bin: Path, tmp_path: Path) -> None:
    """The straggler signal: a node's pace is its own compute time, not the shared step time."""
    args = ("--steps", "6", "--checkpoint-every", "0", "--sleep", "0.05")
    slow = (*args, "--throttle-node", "nx", "--throttle-seconds", "0.3")
    train(job_bin, tmp_path / "slow", *slow, SLURMD_NODENAME="nx")
    other = (*args, "--throttle-node", "elsewhere", "--throttle-seconds", "0.3")
    train(job_bin, tmp_path / "other", *other, SLURMD_NODENAME="nx")
    by_rank = (*args, "--throttle-rank", "0", "--throttle-seconds", "0.3")  # rank 0 is on nx
    train(job_bin, tmp_path / "by_rank", *by_rank, SLURMD_NODENAME="nx")
    until = (*by_rank, "--throttle-factor", "3", "--throttle-until", "3")
    train(job_bin, tmp_path / "until", *until, SLURMD_NODENAME="nx")

    def rates(name: str) -> list[float]:
        lines = (tmp_path / name / "metrics.jsonl").read_text().splitlines()
        return [json.loads(line)["steps_per_sec/nx"] for line in lines]

    def pace(name: str) -> float:
        return sorted(rates(name))[len(rates(name)) // 2]

    assert pace("slow") < 1 / 0.3  # at least 0.35 s of work per step
    assert pace("other") > 2 * pace("slow")  # another node's throttle leaves this one alone
    assert pace("by_rank") < 1 / 0.3  # the node of the rank named
    slow_steps, fast_steps = rates("until")[:3], rates("until")[3:]
    assert max(slow_steps) < 1 / 0.3 < min(fast_steps)  # throttled up to step 3 only


def test_a_refused_resume_leaves_the_group_and_prints_no_cpp_stack(
    job_bin: Path, tmp_path: Path
) -> None:
    proc = run(job_bin, tmp_path, "--steps", "3", PORTAL_RESUME_FROM=str(tmp_path / "missing.pt"))
    assert proc.returncode != 0
    assert f"checkpoint to resume from not found: {tmp_path / 'missing.pt'}" in proc.stdout
    # Each rank left its process group: no C++ frames from a group torn down at exit.
    assert "Exception raised from" not in proc.stderr and "frame #" not in proc.stderr
