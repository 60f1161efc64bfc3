"""The sandbox's generated config texts (pure functions, no cluster needed)."""

import re
import subprocess
from pathlib import Path

import pytest

from clusters.sandbox import daemons, pyenv
from clusters.sandbox.config import (
    GPUS_PER_NODE,
    MARIADB_PORT,
    NODES,
    SANDBOX,
    SECOND,
    SLURMD_PORTS,
    SLURMDBD_PORT,
    Paths,
    render_all,
    render_gres_conf,
    render_slurm_conf,
    render_slurmdbd_conf,
    render_sshd_config,
    render_task_prolog,
    user_path,
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


def test_slurm_conf_has_three_nodes_with_two_gpus_and_own_ports():
    # Three: a 2-node job that excluded one node (a restart after a hang) can run again.
    assert NODES == ("n1", "n2", "n3") and GPUS_PER_NODE == 2
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
    assert "Nodes=n1,n2,n3" in partition
    assert "Default=YES" in partition


def test_gres_conf_gives_every_gpu_a_file():
    lines = [ln for ln in render_gres_conf(PATHS).splitlines() if not ln.startswith("#")]
    assert len(lines) == 6
    for node in NODES:
        files = [ln.split("File=")[1] for ln in lines if ln.startswith(f"NodeName={node} ")]
        assert files == [str(PATHS.gpu_device(node, i)) for i in range(GPUS_PER_NODE)]
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
    assert f"PATH={user_path(PATHS)}" in setenv


SECOND_PATHS = Paths.second(PATHS.root)


def _ports(layout):
    return {layout.slurmctld_port, layout.ssh_port, *map(layout.slurmd_port, layout.nodes)}


def test_the_second_cluster_is_another_cluster_beside_the_sandbox_with_its_tenants():
    assert SECOND_PATHS.root.is_relative_to(PATHS.root)
    conf = settings(render_slurm_conf(SECOND_PATHS, "vm", cpus=4, real_memory_mb=8000))
    assert conf["ClusterName"] == "sandbox-b" != SANDBOX.name
    assert conf["SlurmctldPort"] == str(SECOND.slurmctld_port)
    # Its own controller state, nodes' spools and munged.
    for key in ("StateSaveLocation", "SlurmdSpoolDir", "SlurmctldPidFile", "SlurmdPidFile"):
        assert conf[key].startswith(f"{SECOND_PATHS.root}/")
    assert (
        conf["AuthInfo"] == f"socket={SECOND_PATHS.munge_socket}" != f"socket={PATHS.munge_socket}"
    )
    text = render_slurm_conf(SECOND_PATHS, "vm", cpus=4, real_memory_mb=8000)
    nodes = [ln for ln in text.splitlines() if ln.startswith("NodeName=")]
    assert [ln.split()[0] for ln in nodes] == ["NodeName=b1", "NodeName=b2"]
    assert [ln.split("Port=")[1].split()[0] for ln in nodes] == ["17011", "17012"]
    assert "Nodes=b1,b2 " in text
    assert _ports(SECOND).isdisjoint(_ports(SANDBOX) | {SLURMDBD_PORT, MARIADB_PORT, 6817, 6818})
    sshd = set(render_sshd_config(SECOND_PATHS).splitlines())
    assert {"Port 2232", f"HostKey {SECOND_PATHS.host_key}"} <= sshd
    setenv = next(ln for ln in sshd if ln.startswith("SetEnv "))
    assert f"SLURM_CONF={SECOND_PATHS.slurm_conf} " in setenv
    # The same tenants with the same keys, and the jobs' Python of the sandbox.
    assert SECOND_PATHS.user_key("alice") == PATHS.user_key("alice")
    assert f":{PATHS.pyenv_bin}:" in setenv
    assert f'export SLURM_CONF={SECOND_PATHS.slurm_conf}"' in render_task_prolog(SECOND_PATHS)
    gres = render_gres_conf(SECOND_PATHS)
    assert "NodeName=n1" not in gres and str(SECOND_PATHS.gpu_device("b2", 1)) in gres


def test_the_second_clusters_slurmdbd_is_its_own_on_the_sandboxs_mariadb():
    ports = {SANDBOX.slurmdbd_port, SECOND.slurmdbd_port}
    assert SECOND.slurmdbd_port == 16829 and len(ports) == 2
    assert ports.isdisjoint(_ports(SANDBOX) | _ports(SECOND) | {MARIADB_PORT, 6819})
    conf = settings(
        render_slurm_conf(SECOND_PATHS, "vm", cpus=4, real_memory_mb=8000, accounting=True)
    )
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStoragePort"] == str(SECOND.slurmdbd_port)
    assert conf["AccountingStoragePass"] == str(SECOND_PATHS.munge_socket)  # its own munge
    dbd = settings(render_slurmdbd_conf(SECOND_PATHS, "pw"))
    assert dbd["DbdPort"] == str(SECOND.slurmdbd_port)
    assert dbd["AuthInfo"] == f"socket={SECOND_PATHS.munge_socket}"
    assert dbd["PidFile"].startswith(f"{SECOND_PATHS.root}/")
    # The sandbox's MariaDB, with a database and user of its own.
    assert dbd["StoragePort"] == str(MARIADB_PORT)
    assert (dbd["StorageLoc"], dbd["StorageUser"]) == ("slurm_acct_db_b", "slurm_b")
    first = settings(render_slurmdbd_conf(PATHS, "pw"))
    assert (first["DbdPort"], first["StorageLoc"], first["StorageUser"]) == (
        str(SLURMDBD_PORT), "slurm_acct_db", "slurm"
    )  # fmt: skip
    assert SECOND_PATHS.database == PATHS and PATHS.database == PATHS
    assert SECOND_PATHS.accounting_secret != PATHS.accounting_secret


def test_the_second_cluster_lists_its_slurmdbd_but_not_the_sandboxs_mariadb(tmp_path):
    second = Paths.second(tmp_path)
    second.etc.mkdir(parents=True)
    assert "slurmdbd" not in [x.name for x in daemons.daemons(second)]
    second.slurmdbd_conf.write_text("")  # where it keeps accounting
    names = [x.name for x in daemons.daemons(second)]
    assert names[:3] == ["munged", "slurmdbd", "slurmctld"] and "mariadb" not in names
    dbd = daemons.slurmdbd(second)
    assert dbd.port == SECOND.slurmdbd_port and dbd.pid_file == second.slurmdbd_pid
    mariadb = daemons.mariadb(second)  # the one `second.up` starts if the sandbox's is down
    assert mariadb.pid_file == Paths.of(tmp_path).mariadb_pid


def test_user_path_puts_the_job_python_right_after_the_standin_bin():
    assert PATHS.pyenv_bin == PATHS.root / "pyenv" / "bin"
    dirs = user_path(PATHS).split(":")
    assert dirs[:2] == [str(PATHS.bin), str(PATHS.pyenv_bin)]
    assert "/usr/bin" in dirs


def test_task_prolog_exports_path_and_slurm_conf():
    text = render_task_prolog(PATHS)
    assert text.startswith("#!/bin/sh\n")
    assert f'echo "export PATH={PATHS.bin}:{PATHS.pyenv_bin}' in text
    assert f'echo "export SLURM_CONF={PATHS.slurm_conf}"' in text


def _prolog_path(tmp_path: Path, path: str | None) -> str:
    script = tmp_path / "prolog.sh"
    script.write_text(render_task_prolog(PATHS))
    env = {} if path is None else {"PATH": path}
    out = subprocess.run(
        ["/bin/sh", str(script)], env=env, capture_output=True, text=True, check=True
    ).stdout
    return next(ln for ln in out.splitlines() if ln.startswith("export PATH="))[12:]


@pytest.mark.parametrize(
    "before",
    [
        "/usr/local/bin:/usr/bin:/bin",
        # What an ssh session passes on to its jobs: both dirs there already.
        "{bin}:{pyenv}:/usr/local/bin:/usr/bin:/bin",
        # A step after the batch step, or a user who reordered them.
        "{pyenv}:/usr/local/bin:{bin}:/usr/bin:/bin",
        "/usr/local/bin:/usr/bin:/bin:{bin}",
    ],
)
def test_task_prolog_puts_bin_then_job_python_first_exactly_once(tmp_path, before):
    path = before.format(bin=PATHS.bin, pyenv=PATHS.pyenv_bin)
    after = _prolog_path(tmp_path, path)
    assert after == f"{PATHS.bin}:{PATHS.pyenv_bin}:/usr/local/bin:/usr/bin:/bin"
    # Running it again (the next srun step) changes nothing.
    assert _prolog_path(tmp_path, after) == after


def test_task_prolog_without_a_path_falls_back_to_the_system_dirs(tmp_path):
    after = _prolog_path(tmp_path, None)
    assert after.startswith(f"{PATHS.bin}:{PATHS.pyenv_bin}:")
    assert "/usr/bin" in after.split(":")  # the default PATH (sh may set its own)


def test_job_python_status_lines(tmp_path):
    paths = Paths.of(tmp_path)
    assert pyenv.describe(paths).startswith("torch missing: not installed yet")
    (tmp_path / "pyenv.failed").write_text("pip exited 1: no space left on device\n")
    assert pyenv.describe(paths) == "torch missing: pip exited 1: no space left on device"
    paths.pyenv_bin.mkdir(parents=True)
    (paths.pyenv_bin / "python").touch()
    (paths.pyenv / ".portal-ready").write_text(pyenv.READY_TEXT + "\n")
    assert pyenv.describe(paths) == f"torch {pyenv.TORCH_VERSION}"
    # A marker from other requirements means "install again".
    (paths.pyenv / ".portal-ready").write_text("torch==1.0\n")
    assert not pyenv.ready(paths)


@pytest.mark.parametrize(
    ("line", "refused"),
    [
        ("  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (900 MB)", True),
        ("  Downloading nvidia_cudnn_cu12-9.1.0.70-py3-none-manylinux2014_x86_64.whl", True),
        ("Processing /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", False),
        ("  Downloading filelock-4.3.1-py3-none-any.whl (244 kB)", False),
    ],
)
def test_pip_guard_stops_only_big_downloads(line, refused):
    assert bool(pyenv._HUGE_DOWNLOAD.match(line)) is refused


def test_everything_is_written_under_the_state_dir():
    files = render_all(PATHS, "vm", 4, 8000)
    assert all(path.is_relative_to(PATHS.root) for path in files)
    for text in files.values():
        # Only the state dir's own etc/, never the host's /etc/slurm, /etc/ssh, /etc/munge.
        assert not re.search(r"(^|[\s=])/etc/(slurm|ssh|munge)", text, re.MULTILINE)


def test_pip_that_starts_downloading_torch_is_stopped(tmp_path):
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        'echo "Collecting torch==2.13.0"\n'
        'echo "  Downloading torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl (900 MB)"\n'
        "sleep 30\n"
    )
    fake.chmod(0o755)
    with pytest.raises(pyenv.SandboxError, match="download from the network"):
        pyenv._pip_install(fake, ("torch==2.13.0",))


def test_a_failed_install_is_recorded_and_does_not_raise(tmp_path, monkeypatch):
    def broken(paths):
        raise pyenv.SandboxError("pip exited 1: No matching distribution found for torch")

    monkeypatch.setattr(pyenv, "_install", broken)
    paths = Paths.of(tmp_path)
    assert pyenv.ensure_pyenv(paths) == (
        "torch missing: pip exited 1: No matching distribution found for torch"
    )
    assert pyenv.describe(paths) == pyenv.ensure_pyenv(paths)


def test_node_names_are_added_to_hosts_once(tmp_path, monkeypatch):
    from clusters.sandbox import system

    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost")  # no final newline
    resolvable = {"localhost"}

    def lookup(name):
        if name not in resolvable:
            raise OSError("unknown host")
        return "127.0.0.1"

    monkeypatch.setattr(system.socket, "gethostbyname", lookup)
    assert system.ensure_node_names(NODES, hosts) is True
    lines = hosts.read_text().splitlines()
    assert lines[0] == "127.0.0.1 localhost"
    assert lines[1].split("#")[0].split() == ["127.0.0.1", *NODES]
    resolvable |= set(NODES)
    assert system.ensure_node_names(NODES, hosts) is False
    assert len(hosts.read_text().splitlines()) == 2
