"""The sandbox's generated config texts (pure functions, no cluster needed)."""

import re
from pathlib import Path

from clusters.sandbox.config import (
    NODES,
    SLURMD_PORTS,
    Paths,
    render_all,
    render_gres_conf,
    render_slurm_conf,
    render_sshd_config,
    render_task_prolog,
)

PATHS = Paths.of(Path("/srv/portal/.sandbox"))


def slurm_conf() -> str:
    return render_slurm_conf(PATHS, "vm", cpus=4, real_memory_mb=8000)


def settings(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if re.match(r"^\w+=", line))
    return {k: v for k, v in pairs if " " not in v}


def test_paths_are_absolute_under_the_state_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    paths = Paths.of(Path(".sandbox"))
    assert paths.root == tmp_path / ".sandbox"
    assert paths.slurm_conf.is_relative_to(paths.root)
    assert paths.user_key("alice").is_relative_to(paths.root)


def test_slurm_conf_core_settings():
    conf = settings(slurm_conf())
    assert conf["ClusterName"] == "sandbox"
    assert conf["ProctrackType"] == "proctrack/linuxproc"
    assert conf["TaskPlugin"] == "task/none"
    assert conf["SlurmdTimeout"] == "10"
    assert conf["KillWait"] == "5"
    assert conf["MinJobAge"] == "300"
    assert int(conf["DefMemPerCPU"]) > 0
    assert conf["GresTypes"] == "gpu"
    assert conf["AuthInfo"] == f"socket={PATHS.munge_socket}"
    assert conf["AccountingStorageType"] == "accounting_storage/none"


def test_slurm_conf_per_node_paths_use_percent_n():
    conf = settings(slurm_conf())
    for key in ("SlurmdSpoolDir", "SlurmdPidFile", "SlurmdLogFile"):
        assert "%n" in conf[key]
        assert conf[key].startswith(str(PATHS.root))


def test_slurm_conf_has_both_nodes_with_two_gpus_and_own_ports():
    text = slurm_conf()
    for node in NODES:
        line = next(ln for ln in text.splitlines() if ln.startswith(f"NodeName={node} "))
        assert "Gres=gpu:2" in line
        assert "NodeAddr=127.0.0.1" in line
        assert f"Port={SLURMD_PORTS[node]}" in line
        assert "CPUs=4" in line and "RealMemory=8000" in line
    assert len(set(SLURMD_PORTS.values())) == len(NODES)
    partition = next(ln for ln in text.splitlines() if ln.startswith("PartitionName="))
    assert "PartitionName=gpu " in partition
    assert "Nodes=n1,n2" in partition
    assert "Default=YES" in partition


def test_gres_conf_gives_every_gpu_a_file():
    lines = [ln for ln in render_gres_conf(PATHS).splitlines() if not ln.startswith("#")]
    assert len(lines) == 4
    for node in NODES:
        files = [ln.split("File=")[1] for ln in lines if ln.startswith(f"NodeName={node} ")]
        assert files == [str(PATHS.gpu_device(node, i)) for i in range(2)]
    assert all("Name=gpu" in ln for ln in lines)


def test_sshd_config_is_private_and_key_only():
    text = render_sshd_config(PATHS)
    lines = set(text.splitlines())
    assert "Port 2222" in lines
    assert "ListenAddress 127.0.0.1" in lines
    assert "PasswordAuthentication no" in lines
    assert "UsePAM no" in lines
    assert f"HostKey {PATHS.host_key}" in lines
    assert f"PidFile {PATHS.sshd_pid}" in lines
    setenv = next(ln for ln in lines if ln.startswith("SetEnv "))
    assert f"SLURM_CONF={PATHS.slurm_conf}" in setenv
    assert f"PATH={PATHS.bin}:" in setenv


def test_task_prolog_exports_path_and_slurm_conf():
    text = render_task_prolog(PATHS)
    assert text.startswith("#!/bin/sh\n")
    assert f'echo "export PATH={PATHS.bin}:' in text
    assert f'echo "export SLURM_CONF={PATHS.slurm_conf}"' in text


def test_everything_is_written_under_the_state_dir():
    files = render_all(PATHS, "vm", 4, 8000)
    assert all(path.is_relative_to(PATHS.root) for path in files)
    for text in files.values():
        # Only the state dir's own etc/, never the host's /etc/slurm, /etc/ssh, /etc/munge.
        assert not re.search(r"(^|[\s=])/etc/(slurm|ssh|munge)", text, re.MULTILINE)
