import re
import shlex
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from jobs.enums import Template
from jobs.scripts import RunDir, render_batch_script, slurm_time
from tests import factories


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (timedelta(seconds=1), "0-00:01:00"),
        (timedelta(minutes=90), "0-01:30:00"),
        (timedelta(days=2, seconds=1.5), "2-00:00:02"),
    ],
)
def test_slurm_time(limit: timedelta, text: str) -> None:
    assert slurm_time(limit) == text


def _render(member, project, **overrides: object) -> str:
    job, attempt = factories.job(project, member, factories.cluster(), **overrides)
    return render_batch_script(job=job, attempt=attempt, run_dir=RunDir("/home/mia/runs/x y"))


def test_options_come_from_the_spec(member, project) -> None:
    script = _render(
        member,
        project,
        nodes=2,
        gpus_per_node=2,
        cpus_per_task=8,
        memory_mb=16000,
        partition="gpu",
        time_limit=timedelta(hours=2),
    )
    options = re.findall(r"^#SBATCH (.+)$", script, re.M)
    assert "--nodes=2" in options
    assert "--gres=gpu:2" in options
    assert "--cpus-per-task=8" in options
    assert "--mem=16000M" in options
    assert "--partition=gpu" in options
    assert "--account=vision" in options
    assert "--time=0-02:00:00" in options
    assert "'--output=/home/mia/runs/x y/stdout.log'" in options
    assert any(o.startswith("--job-name=portal-") for o in options)


def test_torchrun_template_runs_one_launcher_per_node(member, project) -> None:
    script = _render(
        member,
        project,
        template=Template.TORCHRUN,
        nodes=2,
        gpus_per_node=4,
        command="examples/ddp_train.py --steps 20",
    )
    launch = next(line for line in script.splitlines() if "torchrun" in line)
    # torchrun itself ignores the warning and stack signals (it would die of them); its
    # workers get them, and know torchrun for a launcher that dumps no stacks.
    assert launch.startswith(
        "srun --unbuffered --ntasks-per-node=1 --kill-on-bad-exit=1 "
        'bash -c \'trap "" USR1 USR2; PORTAL_LAUNCHER=torchrun exec "$@"\' portal-launch torchrun '
    )
    lines = script.splitlines()
    # The batch shell survives the stack signal sent to the whole job (scancel --full).
    assert lines.index('trap "" USR2') < lines.index("(")
    assert "export PORTAL_PROGRESS_DIR=" in script and "export PORTAL_STACKS_DIR=" in script
    assert "export PORTAL_STACK_SIGNAL=USR2" in script
    assert '--nnodes="$SLURM_NNODES"' in launch
    assert "--nproc_per_node=4" in launch
    assert "--rdzv_backend=c10d" in launch
    assert launch.endswith("examples/ddp_train.py --steps 20")
    # The user's part runs in a subshell whose status is recorded, then returned.
    assert script.rstrip().endswith('exit "$portal_code"')
    assert 'MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"' in script


def test_hostile_values_stay_data(member, project) -> None:
    script = _render(member, project, name="x $(touch /tmp/c) `id` 'q\"")
    assert "export PORTAL_JOB_NAME='x $(touch /tmp/c) `id` '\"'\"'q\"'" in script
    result = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True)
    assert result.returncode == 0, result.stderr


def test_the_job_records_its_slurm_id_before_the_users_part(member, project) -> None:
    script = _render(member, project, command="python train.py")
    record = script.index('printf "%s\\n" "$SLURM_JOB_ID" > "$PORTAL_RUN_DIR/slurm_job_id"')
    assert record < script.index("python train.py")


def _python_after_exports(script: str, env: dict[str, str], where: Path) -> str:
    """What a Python started after the script's exports says of its stdout, into a file."""
    exports = [line for line in script.splitlines() if line.startswith("export ")]
    probe = "import sys; print(sys.stdout.write_through)"
    shell = "\n".join([*exports, f"python3 -c {shlex.quote(probe)} > out; cat out"])
    result = subprocess.run(
        ["bash", "-c", shell], env=env, text=True, capture_output=True, cwd=where, check=True
    )
    return result.stdout.strip()


@pytest.mark.parametrize(
    ("env", "write_through"),
    [({}, "True"), ({"PYTHONUNBUFFERED": ""}, "False")],
    ids=["unbuffered by default", "the job's own choice kept"],
)
def test_python_writes_through_into_the_log(
    member, project, env, write_through, tmp_path: Path
) -> None:
    """Block-buffered stdout reaches the log in 8 KB bursts: every record of a burst would take
    the step of the latest bar. The script makes Python unbuffered unless the job chose."""
    script = _render(member, project, command="python train.py")
    assert (
        _python_after_exports(script, {"PATH": "/usr/bin:/bin", **env}, tmp_path) == write_through
    )
    assert 'export SLURM_UNBUFFEREDIO="${SLURM_UNBUFFEREDIO-1}"' in script


def test_the_working_directory_is_recorded_before_the_command(member, project) -> None:
    script = _render(member, project, command="python train.py", setup="cd /tmp/elsewhere")
    record = script.index('printf "%s\\n" "$PWD"; else echo; fi > "$PORTAL_RUN_DIR/workdir"')
    assert script.index("cd /tmp/elsewhere") < record < script.index("python train.py")


def test_the_accounts_home_is_no_jobs_working_tree(member, project, tmp_path: Path) -> None:
    """Every job of the account starts in its home without code: the trainers' files found
    there could be any of its jobs', so the run's own tree is looked for only elsewhere."""
    script = _render(member, project, command="python train.py")
    (line,) = [x for x in script.splitlines() if x.startswith('if [ "$PWD" != "$HOME" ]')]
    project_dir = tmp_path / "project"
    project_dir.mkdir()
    for cwd, written in ((tmp_path, "\n"), (project_dir, f"{project_dir}\n")):
        env = {"HOME": str(tmp_path), "PORTAL_RUN_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
        subprocess.run(["bash", "-c", line], env=env, cwd=cwd, check=True)
        assert (tmp_path / "workdir").read_text() == written
