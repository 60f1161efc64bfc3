"""Paths and config texts of the sandbox cluster, as pure functions.

Everything the sandbox writes lives under one state directory so that the host's
/etc/slurm, /etc/ssh and /etc/munge stay untouched and ``down`` + ``rm -rf``
leaves nothing behind but the two users and the nodes' line in /etc/hosts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

# The stand-in nvidia-smi is installed alone (stdlib only, no package to import from), so
# the number of GPUs a node has is kept there and read from there.
from .nvidia_smi import GPUS_PER_NODE as GPUS_PER_NODE

CLUSTER_NAME = "sandbox"
PARTITION = "gpu"
# Three nodes, so a 2-node job can run again without one it excluded (a hang's or a node
# failure's restart). A checkout that knows only n1 and n2 can still run `up` on the same
# state dir: it restarts the daemons with its own two-node slurm.conf (see the README).
NODES = ("n1", "n2", "n3")
GPU_MODEL = "H200"
# Tenants: alice and bob run most tests' jobs; carol is the one a test may make hostile
# (a rewritten ~/.bashrc, forged tools on her PATH) without disturbing the others.
USERS = ("alice", "bob", "carol")
# The portal's own login: no job runs as it; job state, accounting and cluster status
# are read as it. /bin/sh, whose non-interactive runs read no rc file.
PORTAL_USER = "portal-svc"
PORTAL_USER_SHELL = "/bin/sh"
SSH_HOST = "127.0.0.1"
SSH_PORT = 2222
# Project-specific ports, away from Slurm's defaults (6817/6818) so a system
# Slurm on the same machine cannot collide with the sandbox.
SLURMCTLD_PORT = 16817
SLURMD_PORTS = {node: 17001 + i for i, node in enumerate(NODES)}
SLURMDBD_PORT = 16819
# The sandbox's own MariaDB for slurmdbd, on loopback only, away from 3306.
MARIADB_PORT = 16306
ACCOUNTING_DB = "slurm_acct_db"
ACCOUNTING_DB_USER = "slurm"
BASE_RUN_DIR = "~/portal-runs"
# Character major of real NVIDIA devices; the minor is the GPU number on the host.
NVIDIA_MAJOR = 195


@dataclass(frozen=True)
class Layout:
    """What tells one sandbox cluster from another on this host: its name, nodes and ports,
    and its slurmdbd's port and database (and that database's user) on the sandbox's MariaDB."""

    name: str
    nodes: tuple[str, ...]
    slurmctld_port: int
    first_slurmd_port: int  # the nodes' slurmd listen on this one and the next ones
    ssh_port: int
    slurmdbd_port: int
    accounting_db: str
    accounting_db_user: str

    def slurmd_port(self, node: str) -> int:
        return self.first_slurmd_port + self.nodes.index(node)


SANDBOX = Layout(
    CLUSTER_NAME, NODES, SLURMCTLD_PORT, SLURMD_PORTS[NODES[0]], SSH_PORT,
    SLURMDBD_PORT, ACCOUNTING_DB, ACCOUNTING_DB_USER,
)  # fmt: skip
# The second cluster (clusters.sandbox.second): its own controller, nodes, login node and
# slurmdbd, on ports away from the sandbox's and from Slurm's defaults.
SECOND = Layout("sandbox-b", ("b1", "b2"), 16827, 17011, 2232, 16829, "slurm_acct_db_b", "slurm_b")


@dataclass(frozen=True)
class Paths:
    """Every file and directory under the state dir (absolute), and the cluster they make."""

    root: Path
    layout: Layout = SANDBOX
    # Where the users' keys and the jobs' Python are: a second cluster has the same
    # tenants, logging in with the same keys, as sites share accounts across clusters.
    tenants: Path | None = None

    @classmethod
    def of(cls, state_dir: Path) -> Paths:
        # Absolute, because daemons chdir and ssh sessions start in $HOME.
        return cls(state_dir.expanduser().resolve())

    @classmethod
    def second(cls, state_dir: Path) -> Paths:
        """The second cluster's, in a directory of the sandbox's state dir."""
        first = cls.of(state_dir)
        return cls(first.root / SECOND.name, SECOND, first.root)

    @property
    def etc(self) -> Path:
        return self.root / "etc"

    @property
    def slurm_conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def node_cpus(self) -> Path:  # CPUs each node declares, while a soak runs
        return self.root / "node-cpus"

    @property
    def gres_conf(self) -> Path:
        return self.etc / "gres.conf"

    @property
    def sshd_config(self) -> Path:
        return self.etc / "sshd_config"

    @property
    def trusted_user_ca_keys(self) -> Path:  # the portal's CAs, written by the portal
        return self.etc / "trusted_user_ca_keys"

    @property
    def task_prolog(self) -> Path:
        return self.etc / "task_prolog.sh"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def pyenv(self) -> Path:
        """The jobs' Python (a venv with PyTorch), readable by every sandbox user."""
        return (self.tenants or self.root) / "pyenv"

    @property
    def pyenv_bin(self) -> Path:
        return self.pyenv / "bin"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    @property
    def run(self) -> Path:
        return self.root / "run"

    @property
    def log(self) -> Path:
        return self.root / "log"

    @property
    def spool(self) -> Path:
        return self.root / "spool"

    @property
    def ctld_state(self) -> Path:
        return self.spool / "slurmctld"

    @property
    def munge(self) -> Path:
        # Owned by the munge user: munged writes its socket, pid and seed here.
        return self.root / "munge"

    @property
    def munge_key(self) -> Path:
        return self.munge / "munge.key"

    @property
    def munge_socket(self) -> Path:
        return self.munge / "munge.socket"

    @property
    def munge_pid(self) -> Path:
        return self.munge / "munged.pid"

    @property
    def ssh(self) -> Path:
        return self.root / "ssh"

    @property
    def host_key(self) -> Path:
        return self.ssh / "ssh_host_ed25519_key"

    @property
    def keys(self) -> Path:
        return (self.tenants or self.root) / "keys"

    def user_key(self, user: str) -> Path:
        return self.keys / f"{user}_ed25519"

    @property
    def slurmctld_pid(self) -> Path:
        return self.run / "slurmctld.pid"

    def slurmd_pid(self, node: str) -> Path:
        return self.run / f"slurmd-{node}.pid"

    @property
    def sshd_pid(self) -> Path:
        return self.run / "sshd.pid"

    @property
    def slurmdbd_conf(self) -> Path:
        # slurmdbd finds it beside $SLURM_CONF.
        return self.etc / "slurmdbd.conf"

    @property
    def slurmdbd_pid(self) -> Path:
        return self.run / "slurmdbd.pid"

    @property
    def database(self) -> Paths:
        """The sandbox's: its MariaDB keeps the records of every sandbox cluster's slurmdbd."""
        return Paths(self.tenants) if self.tenants else self

    @property
    def mariadb(self) -> Path:
        """MariaDB's data directory (root-only): slurmdbd's job records."""
        return self.root / "mariadb"

    @property
    def mariadb_socket(self) -> Path:
        return self.run / "mariadb.sock"

    @property
    def mariadb_pid(self) -> Path:
        return self.run / "mariadb.pid"

    @property
    def accounting_secret(self) -> Path:
        return self.root / "keys" / "slurmdbd-db-password"

    def gpu_device(self, node: str, index: int) -> Path:
        return self.dev / f"{node}-nvidia{index}"


def user_path(paths: Paths) -> str:
    """PATH for ssh sessions and jobs: the stand-in nvidia-smi first, then the job python."""
    return f"{paths.bin}:{paths.pyenv_bin}:/usr/local/bin:/usr/bin:/bin"


def render_accounting(paths: Paths, accounting: bool) -> str:
    """slurm.conf's accounting lines: slurmdbd when the sandbox runs one, else none."""
    if not accounting:
        return (
            "JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n"
        )
    # No AccountingStorageEnforce: jobs of users without an association still run,
    # so turning accounting on changes nothing for jobs already queued.
    return f"""\
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={paths.layout.slurmdbd_port}
# For slurmdbd connections the munge socket is given here, not by AuthInfo.
AccountingStoragePass={paths.munge_socket}
AccountingStorageTRES=gres/gpu
"""


def render_slurmdbd_conf(paths: Paths, db_password: str) -> str:
    return f"""\
# Generated by clusters.sandbox; rewritten by `manage.py sandbox up`.
AuthType=auth/munge
AuthInfo=socket={paths.munge_socket}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={paths.layout.slurmdbd_port}
SlurmUser=root
PidFile={paths.slurmdbd_pid}
LogFile={paths.log}/slurmdbd.log
DebugLevel=info
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={MARIADB_PORT}
StorageUser={paths.layout.accounting_db_user}
StoragePass={db_password}
StorageLoc={paths.layout.accounting_db}
"""


def render_slurm_conf(
    paths: Paths, hostname: str, cpus: int, real_memory_mb: int, accounting: bool = False
) -> str:
    # More CPUs than the host has (clusters.sandbox.cluster): slurmd takes the file's word,
    # and each CPU's share of memory is what a job that mostly sleeps needs.
    declared = cpus > (os.cpu_count() or 1)
    overrides = "SlurmdParameters=config_overrides\n" if declared else ""
    def_mem = max(real_memory_mb // cpus, 8) if declared else max(real_memory_mb // cpus // 2, 100)
    layout = paths.layout
    nodes = "\n".join(
        f"NodeName={node} NodeHostname={hostname} NodeAddr=127.0.0.1 "
        f"Port={layout.slurmd_port(node)} CPUs={cpus} RealMemory={real_memory_mb} "
        f"Gres=gpu:{GPUS_PER_NODE} State=UNKNOWN"
        for node in layout.nodes
    )
    return f"""\
# Generated by clusters.sandbox; rewritten by `manage.py sandbox up`.
ClusterName={layout.name}
SlurmctldHost={hostname}(127.0.0.1)
SlurmctldPort={layout.slurmctld_port}
SlurmUser=root
SlurmdUser=root
# Our own munged, so the host's /run/munge is neither needed nor disturbed.
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={paths.munge_socket}
StateSaveLocation={paths.ctld_state}
SlurmdSpoolDir={paths.spool}/slurmd-%n
SlurmctldPidFile={paths.slurmctld_pid}
SlurmdPidFile={paths.run}/slurmd-%n.pid
SlurmctldLogFile={paths.log}/slurmctld.log
SlurmdLogFile={paths.log}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups or systemd in the sandbox.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
TaskProlog={paths.task_prolog}
GresTypes=gpu
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
# Without it a job takes a node's whole RealMemory and the next one waits.
DefMemPerCPU={def_mem}
# Short timeouts keep node-failure and cancel tests fast.
SlurmdTimeout=10
SlurmctldTimeout=10
KillWait=5
MinJobAge=300
ReturnToService=2
{overrides}{render_accounting(paths, accounting)}{nodes}
PartitionName={PARTITION} Nodes={",".join(layout.nodes)} Default=YES MaxTime=INFINITE State=UP
"""


def render_gres_conf(paths: Paths) -> str:
    # Count-only GPUs are dropped by slurmd ("Removing file-less GPU"), which
    # leaves the node INVAL, so each stand-in GPU gets a device file.
    lines = ["# Generated by clusters.sandbox."]
    for node in paths.layout.nodes:
        for index in range(GPUS_PER_NODE):
            lines.append(
                f"NodeName={node} Name=gpu Type={GPU_MODEL.lower()} "
                f"File={paths.gpu_device(node, index)}"
            )
    return "\n".join(lines) + "\n"


def render_task_prolog(paths: Paths) -> str:
    # slurmd reads "export NAME=value" lines from the TaskProlog's stdout; this
    # puts the stand-in nvidia-smi and the job python on the PATH even for
    # --export=NONE jobs. The batch step and each srun step run it, so both dirs
    # are first dropped from the PATH and then put in front, in that order, once.
    return f"""#!/bin/sh
# Generated by clusters.sandbox.
set -f
rest=""
IFS=:
for dir in ${{PATH:-/usr/local/bin:/usr/bin:/bin}}; do
  case "$dir" in
    "{paths.bin}"|"{paths.pyenv_bin}"|"") ;;
    *) rest="$rest:$dir" ;;
  esac
done
echo "export PATH={paths.bin}:{paths.pyenv_bin}$rest"
echo "export SLURM_CONF={paths.slurm_conf}"
"""


def render_sshd_config(paths: Paths) -> str:
    users = " ".join((*USERS, PORTAL_USER))
    return f"""\
# Generated by clusters.sandbox: a private sshd for the sandbox cluster users.
Port {paths.layout.ssh_port}
ListenAddress {SSH_HOST}
HostKey {paths.host_key}
PidFile {paths.sshd_pid}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
PermitRootLogin no
AllowUsers {users}
AuthorizedKeysFile .ssh/authorized_keys
# Certificates signed by the portal's CAs (`manage.py ssh_ca public-keys`, re-read at each
# login) log in as their one principal, the user's name (docs/ssh-certificates.md).
TrustedUserCAKeys {paths.trusted_user_ca_keys}
AuthorizedPrincipalsFile none
X11Forwarding no
PrintMotd no
# Client commands (sbatch, squeue, nvidia-smi) must find the sandbox config
# and the stand-in tools without any dotfiles in the users' homes.
SetEnv SLURM_CONF={paths.slurm_conf} PATH={user_path(paths)}
Subsystem sftp internal-sftp
"""


def render_all(
    paths: Paths, hostname: str, cpus: int, real_memory_mb: int, accounting: bool = False
) -> dict[Path, str]:
    """Every generated text file, keyed by where it goes."""
    return {
        paths.slurm_conf: render_slurm_conf(paths, hostname, cpus, real_memory_mb, accounting),
        paths.gres_conf: render_gres_conf(paths),
        paths.task_prolog: render_task_prolog(paths),
        paths.sshd_config: render_sshd_config(paths),
    }
