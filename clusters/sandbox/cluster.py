"""Bring the sandbox cluster up, down, and report on it."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from . import accounting as acct
from . import daemons as d
from . import isolation, pyenv
from .config import (
    BASE_RUN_DIR,
    GPU_MODEL,
    GPUS_PER_NODE,
    PARTITION,
    PORTAL_USER,
    SSH_HOST,
    Paths,
    render_all,
)
from .system import (
    SandboxError,
    check_port,
    ensure_gpu_devices,
    ensure_munge_key,
    ensure_node_names,
    ensure_packages,
    ensure_portal_user,
    ensure_ssh_key,
    ensure_users,
    install_nvidia_smi,
    prepare_tree,
    require_root,
    write_if_changed,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SandboxInfo:
    """What the portal needs to register the sandbox as a cluster."""

    ssh_host: str
    ssh_port: int
    host_key: str  # "ssh-ed25519 AAAA...", the line a client pins
    # username -> OpenSSH private key text; kept out of repr so printing is safe
    users: dict[str, str] = field(repr=False)
    base_run_dir: str
    partition: str
    gpu_model: str
    nodes: list[str]
    gpus_per_node: int
    accounting: bool = False  # slurmdbd runs: sacct and sacctmgr answer
    portal_user: str = PORTAL_USER  # the portal's own login, no job runs as it
    portal_key: str = field(default="", repr=False)
    slurm_conf: str = ""  # SLURM_CONF for commands run in a clean environment


MIN_NODE_CPUS = 8


def _node_resources(paths: Paths) -> tuple[int, int]:
    """CPUs and RealMemory (MB) per node; every slurmd reports the whole host.

    Each node declares at least MIN_NODE_CPUS, more than a small host has (slurm.conf's
    `SlurmdParameters=config_overrides`): the suite's jobs mostly sleep or wait, and with
    the host's two CPUs a node, the jobs of four test workers queued behind each other
    on a busy machine (a DDP test's job pending for 120 s in CI). A number in the state
    directory's `node-cpus` file (written by the soak bench, bench/soak.py, for as long
    as it runs, so that any `up` meanwhile keeps it) declares more: a thousand cheap
    jobs run at once.
    """
    declared = paths.node_cpus.read_text().strip() if paths.node_cpus.exists() else ""
    cpus = int(declared) if declared.isdigit() else max(os.cpu_count() or 1, MIN_NODE_CPUS)
    mem_kb = 4 * 1024 * 1024
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    # Configured memory must not exceed what slurmd detects, or the node drains.
    return cpus, max(min(mem_kb // 1024 // 2, 16384), 512)


def prepare_host(paths: Paths) -> None:
    """What a cluster of `paths` needs before its daemons, but its tenants: its tree, munge
    and host keys, stand-in GPUs and nvidia-smi, and node names."""
    require_root()
    ensure_packages()
    prepare_tree(paths)
    ensure_munge_key(paths)
    ensure_gpu_devices(paths, paths.layout.nodes, GPUS_PER_NODE)
    ensure_ssh_key(paths.host_key, f"{paths.layout.name}-sshd")
    if not paths.trusted_user_ca_keys.exists():  # the portal writes its CAs' lines there
        write_if_changed(paths.trusted_user_ca_keys, "", 0o644)
    install_nvidia_smi(paths)
    try:
        ensure_node_names(paths.layout.nodes)
    except OSError as exc:  # a read-only /etc/hosts: jobs must use NodeAddr instead
        logger.warning("could not make %s resolve: %s", ", ".join(paths.layout.nodes), exc)


def write_config(paths: Paths, accounting: bool) -> set[Path]:
    """Write the cluster's config files; the ones that changed."""
    cpus, memory = _node_resources(paths)
    texts = render_all(paths, socket.gethostname(), cpus, memory, accounting)
    return {
        path
        for path, text in texts.items()
        if write_if_changed(path, text, 0o755 if path == paths.task_prolog else 0o644)
    }


def start_stopped(daemons: list[d.Daemon], paths: Paths) -> None:
    # Fail before starting anything if a port we still need is taken.
    for daemon in daemons:
        if daemon.port is not None and d.running_pid(daemon) is None:
            check_port(daemon.port, daemon.name)
    for daemon in daemons:
        if d.running_pid(daemon) is None:
            d.start(daemon, paths)


def stop_all(paths: Paths) -> list[str]:
    """Stop the daemons of `paths` (reverse order); returns the names of those that ran."""
    return [daemon.name for daemon in reversed(d.daemons(paths)) if d.stop(daemon)]


def describe(
    paths: Paths, keys: dict[str, str], portal_key: str, accounting: bool = False
) -> SandboxInfo:
    host_key = paths.host_key.with_suffix(".pub").read_text().split()
    return SandboxInfo(
        ssh_host=SSH_HOST,
        ssh_port=paths.layout.ssh_port,
        host_key=" ".join(host_key[:2]),
        users=keys,
        base_run_dir=BASE_RUN_DIR,
        partition=PARTITION,
        gpu_model=GPU_MODEL,
        nodes=list(paths.layout.nodes),
        gpus_per_node=GPUS_PER_NODE,
        accounting=accounting,
        portal_user=PORTAL_USER,
        portal_key=portal_key,
        slurm_conf=str(paths.slurm_conf),
    )


def up(state_dir: Path, timeout: float = 90) -> SandboxInfo:
    """Start (or reuse) munged, slurmctld, a slurmd per node and sshd; wait for idle nodes."""
    paths = Paths.of(state_dir)
    prepare_host(paths)
    keys = ensure_users(paths)
    portal_key = ensure_portal_user(paths)
    try:
        logger.info("sandbox: %s", isolation.close())
    except SandboxError as exc:
        logger.warning("the sandbox's tenants can reach the portal's services: %s", exc)

    accounting = acct.accounting_wanted()
    if accounting:
        # MariaDB and slurmdbd before slurmctld (re)starts, while the old one still runs.
        try:
            acct.accounting_up(paths)
        except SandboxError as exc:
            logger.warning("the sandbox runs without accounting: %s", exc)
            accounting = False
    old_conf = acct.read_text(paths.slurm_conf)
    changed = write_config(paths, accounting)
    all_daemons = [x for x in d.daemons(paths) if x.name not in d.ACCOUNTING_DAEMONS]
    slurm = [x for x in all_daemons if x.binary in ("slurmctld", "slurmd")]
    ctld = next(x for x in slurm if x.binary == "slurmctld")
    sshd = next(x for x in all_daemons if x.binary == "sshd")
    # Switching accounting on or off: only slurmctld restarts (a second or two; jobs
    # keep running), and the slurmds re-read the file.
    reconfigure = (
        paths.slurm_conf in changed
        and paths.gres_conf not in changed
        and bool(old_conf)
        and acct.is_only_accounting_change(old_conf, acct.read_text(paths.slurm_conf))
    )
    if accounting:
        acct.ensure_cluster_registered(paths)  # sacctmgr reads the new slurm.conf
        acct.ensure_operator(paths, PORTAL_USER)
    if reconfigure:
        d.stop(ctld)
    # Nodes left INVAL by an old config only recover when both daemons restart.
    elif changed & {paths.slurm_conf, paths.gres_conf}:
        for daemon in reversed(slurm):
            d.stop(daemon)
    if paths.sshd_config in changed:
        d.reload_sshd(sshd, paths)  # the open sessions of other tests and workers go on

    start_stopped(all_daemons, paths)
    if reconfigure:
        d.reconfigure(paths)
    # While the nodes come up: the jobs' torch (a no-op once made; never fails `up`).
    pyenv.ensure_pyenv(paths)
    d.wait_idle(paths, timeout)
    return describe(paths, keys, portal_key, accounting)


def down(state_dir: Path) -> list[str]:
    """End the jobs, then stop the daemons this state dir started (reverse order); returns
    the daemons' names."""
    paths = Paths.of(state_dir)
    d.end_jobs(paths)
    stopped = stop_all(paths)
    isolation.reopen()
    return stopped


def status(state_dir: Path, *, second: bool = False) -> str:
    """The daemons, the jobs' Python, tenant isolation and the nodes (of the second cluster)."""
    paths = Paths.second(state_dir) if second else Paths.of(state_dir)
    lines = [f"state dir: {paths.root}"]
    for daemon in d.daemons(paths):
        pid = d.running_pid(daemon)
        state = f"running (pid {pid})" if pid else "stopped"
        lines.append(f"  {daemon.name:<11} {state}")
    lines.append(f"job python: {pyenv.describe(paths)}")
    lines.append(f"tenant isolation: {isolation.describe()}")
    ctld = next(x for x in d.daemons(paths) if x.binary == "slurmctld")
    if d.running_pid(ctld) and paths.slurm_conf.exists():
        proc = subprocess.run(
            ["sinfo", "-N", "-o", "%N %P %T %G"],
            env=d.slurm_env(paths),
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        out = (proc.stdout or proc.stderr).strip()
        lines.append("nodes:")
        lines.extend(f"  {line}" for line in out.splitlines())
    return "\n".join(lines)


__all__ = ["SandboxError", "SandboxInfo", "down", "status", "up"]
