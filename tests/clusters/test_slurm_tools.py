"""Slurm commands start by absolute path in a clean environment (`SlurmTools.wrap`)."""

import shlex

import pytest

from clusters.slurm import SlurmTools, squeue_argv


def test_a_query_runs_by_absolute_path_under_env_i_with_the_clusters_slurm_conf() -> None:
    tools = SlurmTools(bin_dir="/opt/slurm/bin", conf="/etc/slurm-llnl/slurm.conf")
    argv = tools.wrap(squeue_argv(user="alice"))
    assert argv[:3] == ["/usr/bin/env", "-i", "PATH=/usr/bin:/bin"]
    assert "TZ=UTC" in argv and "SLURM_TIME_FORMAT=standard" in argv
    assert "SLURM_CONF=/etc/slurm-llnl/slurm.conf" in argv
    binary = argv.index("/opt/slurm/bin/squeue")
    assert all("=" in arg for arg in argv[3:binary])  # only variables before the binary
    assert argv[binary + 1 :] == squeue_argv(user="alice")[1:]
    assert shlex.split(shlex.join(argv)) == argv


def test_sbatch_keeps_the_session_environment_but_not_its_path_lookup() -> None:
    argv = SlurmTools().wrap(["sbatch", "--parsable", "--", "job.sh"], clean=False)
    assert argv[0] == "/usr/bin/env" and "-i" not in argv
    assert "/usr/bin/sbatch" in argv and "sbatch" not in argv


def test_without_a_slurm_conf_none_is_set() -> None:
    assert not any(arg.startswith("SLURM_CONF=") for arg in SlurmTools().wrap(["sinfo"]))


@pytest.mark.parametrize(
    ("bin_dir", "conf"),
    [("bin", ""), ("/usr/bin;id", ""), ("/usr/bin", "slurm.conf"), ("/usr/../tmp", "")],
)
def test_paths_must_be_plain_absolute_paths(bin_dir: str, conf: str) -> None:
    with pytest.raises(ValueError, match="absolute path"):
        SlurmTools(bin_dir=bin_dir, conf=conf)


@pytest.mark.parametrize("command", ["", "../squeue", "squeue;id", "python3", "sh"])
def test_only_slurm_commands_are_wrapped(command: str) -> None:
    with pytest.raises(ValueError, match="Slurm command"):
        SlurmTools().wrap([command] if command else [])
