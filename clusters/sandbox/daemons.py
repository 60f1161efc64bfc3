"""Start, find and stop the sandbox daemons by their pid files."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from .config import MARIADB_PORT, Paths
from .system import SandboxError, check_port


@dataclass(frozen=True)
class Daemon:
    name: str  # for messages and status
    binary: str  # what /proc/<pid>/cmdline must mention, so a reused pid is not ours
    pid_file: Path
    log_file: Path
    port: int | None


ACCOUNTING_DAEMONS = ("mariadb", "slurmdbd")


def mariadb(paths: Paths) -> Daemon:
    """The sandbox's MariaDB, which the slurmdbd of every sandbox cluster writes to."""
    db = paths.database
    return Daemon("mariadb", "mariadbd", db.mariadb_pid, db.log / "mariadb.log", MARIADB_PORT)


def slurmdbd(paths: Paths) -> Daemon:
    port = paths.layout.slurmdbd_port
    return Daemon("slurmdbd", "slurmdbd", paths.slurmdbd_pid, paths.log / "slurmdbd.log", port)


def accounting_daemons(paths: Paths) -> list[Daemon]:
    """The cluster's own: a second cluster's slurmdbd uses the sandbox's MariaDB."""
    return [slurmdbd(paths)] if paths.database != paths else [mariadb(paths), slurmdbd(paths)]


def daemons(paths: Paths) -> list[Daemon]:
    """In start order: munge first (everyone authenticates through it), sshd last.

    mariadb and slurmdbd are listed where the cluster keeps accounting (slurmdbd.conf).
    """
    accounting = accounting_daemons(paths) if paths.slurmdbd_conf.exists() else []
    layout = paths.layout
    return [
        Daemon("munged", "munged", paths.munge_pid, paths.munge / "munged.log", None),
        *accounting,
        Daemon(
            "slurmctld",
            "slurmctld",
            paths.slurmctld_pid,
            paths.log / "slurmctld.log",
            layout.slurmctld_port,
        ),
        *(
            Daemon(
                f"slurmd {node}",
                "slurmd",
                paths.slurmd_pid(node),
                paths.log / f"slurmd-{node}.log",
                layout.slurmd_port(node),
            )
            for node in layout.nodes
        ),
        Daemon("sshd", "sshd", paths.sshd_pid, paths.log / "sshd.log", layout.ssh_port),
    ]


def running_pid(daemon: Daemon) -> int | None:
    try:
        pid = int(daemon.pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # A zombie left by a daemon that died is not running.
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return None
    return pid if daemon.binary.encode() in cmdline else None


def slurm_env(paths: Paths) -> dict[str, str]:
    return {**os.environ, "SLURM_CONF": str(paths.slurm_conf)}


def _command(daemon: Daemon, paths: Paths) -> tuple[list[str], dict[str, str] | None]:
    if daemon.name == "munged":
        return [
            "runuser", "-u", "munge", "--", "munged",
            f"--key-file={paths.munge_key}",
            f"--socket={paths.munge_socket}",
            f"--pid-file={paths.munge_pid}",
            f"--log-file={daemon.log_file}",
            f"--seed-file={paths.munge / 'munged.seed'}",
        ], None  # fmt: skip
    if daemon.name == "mariadb":
        db = paths.database
        return [
            "mariadbd", "--no-defaults", f"--datadir={db.mariadb}",
            f"--socket={db.mariadb_socket}", f"--pid-file={db.mariadb_pid}",
            f"--port={MARIADB_PORT}", "--bind-address=127.0.0.1", "--skip-name-resolve",
            "--user=root", f"--log-error={daemon.log_file}",
            "--innodb-buffer-pool-size=64M", "--innodb-lock-wait-timeout=900",
        ], None  # fmt: skip
    if daemon.name == "slurmdbd":
        return ["slurmdbd"], slurm_env(paths)  # reads slurmdbd.conf beside $SLURM_CONF
    if daemon.name == "slurmctld":
        # -i: a state file from an older config must not stop the start.
        return ["slurmctld", "-i", "-f", str(paths.slurm_conf)], slurm_env(paths)
    if daemon.name.startswith("slurmd "):
        node = daemon.name.split()[1]
        return ["slurmd", "-N", node, "-f", str(paths.slurm_conf)], slurm_env(paths)
    if daemon.name == "sshd":
        return ["/usr/sbin/sshd", "-f", str(paths.sshd_config), "-E", str(daemon.log_file)], None
    raise ValueError(daemon.name)


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(f"    {line}" for line in text[-lines:])


def start(daemon: Daemon, paths: Paths, timeout: float = 15) -> int:
    """Start a daemon (which forks itself) and wait for its pid file."""
    if daemon.port is not None:
        check_port(daemon.port, daemon.name)
    daemon.pid_file.unlink(missing_ok=True)
    cmd, env = _command(daemon, paths)
    if daemon.name == "mariadb":
        # mariadbd does not fork: run it in its own session, detached from ours.
        with daemon.log_file.open("ab") as log:
            subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        proc = subprocess.CompletedProcess(cmd, 0, "", "")
    else:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SandboxError(
            f"{daemon.name} failed to start (`{' '.join(cmd)}` exited {proc.returncode}): "
            f"{(proc.stderr or proc.stdout).strip()}\nLog tail of {daemon.log_file}:\n"
            f"{log_tail(daemon.log_file)}"
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = running_pid(daemon)
        if pid is not None:
            return pid
        time.sleep(0.1)
    raise SandboxError(
        f"{daemon.name} did not come up within {timeout:.0f}s (no live pid in "
        f"{daemon.pid_file}). Log tail of {daemon.log_file}:\n{log_tail(daemon.log_file)}"
    )


def stop(daemon: Daemon, timeout: float = 10) -> bool:
    """SIGTERM the daemon from its pid file; SIGKILL if it lingers. True if it ran.

    Returns once the process is gone, not once its pid file is: some daemons
    remove the file early in their shutdown, and on a busy machine the rest
    of it can take seconds.
    """
    pid = running_pid(daemon)
    if pid is None:
        return False
    started = process_start(pid)
    os.kill(pid, signal.SIGTERM)
    if not _gone(pid, started, timeout):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _gone(pid, started, timeout)
    # Daemons do not always remove their pid file; a stale one would
    # mislead the next `up` once the pid is reused.
    daemon.pid_file.unlink(missing_ok=True)
    return True


def reload_sshd(daemon: Daemon, paths: Paths, timeout: float = 15) -> bool:
    """Make a running sshd re-read its config; False if it was not running.

    SIGHUP: sshd re-executes itself with the same arguments and pid, and the sessions it
    already forked go on; only logins in the instant of the re-execution wait or retry.
    The config is checked first (`sshd -t`): a bad one would stop the listener.
    """
    pid = running_pid(daemon)
    if pid is None:
        return False
    checked = subprocess.run(
        ["/usr/sbin/sshd", "-t", "-f", str(paths.sshd_config)],
        capture_output=True,
        text=True,
        check=False,
    )
    if checked.returncode != 0:
        raise SandboxError(
            f"{paths.sshd_config} is not a valid sshd config, sshd keeps its old one: "
            f"{(checked.stderr or checked.stdout).strip()}"
        )
    before = _listening_lines(daemon.log_file)
    os.kill(pid, signal.SIGHUP)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _listening_lines(daemon.log_file) > before and running_pid(daemon) == pid:
            return True
        time.sleep(0.1)
    raise SandboxError(
        f"sshd did not listen again within {timeout:.0f}s of its reload. Log tail of "
        f"{daemon.log_file}:\n{log_tail(daemon.log_file)}"
    )


def _listening_lines(log_file: Path) -> int:
    try:
        return log_file.read_text(errors="replace").count("Server listening on")
    except OSError:
        return 0


def process_start(pid: int) -> str | None:
    """When `pid` started (clock ticks since boot), None once it has exited: with the pid,
    it names one process, where a pid alone can be another's after the numbers wrap (32,768
    here, which a busy suite goes through in minutes)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else fields[19]


def _gone(pid: int, started: str | None, timeout: float) -> bool:
    """Wait until the process has exited (a zombie counts as exited); False if it still runs."""
    deadline = time.monotonic() + timeout
    while True:
        now = process_start(pid)
        if now is None or now != started:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


def reconfigure(paths: Paths, timeout: float = 20) -> None:
    """Make the running slurmds re-read slurm.conf (waits for slurmctld to answer)."""
    deadline = time.monotonic() + timeout
    while True:
        proc = subprocess.run(
            ["scontrol", "reconfigure"],
            env=slurm_env(paths),
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
        if proc.returncode == 0 or time.monotonic() > deadline:
            return
        time.sleep(0.3)


def node_states(paths: Paths) -> dict[str, str]:
    proc = subprocess.run(
        ["sinfo", "-h", "-N", "-o", "%N %T"],
        env=slurm_env(paths),
        capture_output=True,
        text=True,
        timeout=15,
        check=False,
    )
    if proc.returncode != 0:
        return {}
    states = {}
    for line in proc.stdout.splitlines():
        node, _, state = line.partition(" ")
        states[node] = state.strip()
    return states


def wait_idle(paths: Paths, timeout: float = 60) -> None:
    """Wait until every node is idle (or busy with jobs) in sinfo."""
    ready = ("idle", "mixed", "allocated", "completing")
    deadline = time.monotonic() + timeout
    states: dict[str, str] = {}
    while time.monotonic() < deadline:
        states = node_states(paths)
        # "idle*" means not responding yet (state recovered from file, slurmd not back).
        if all(states.get(node, "") in ready for node in paths.layout.nodes):
            return
        time.sleep(0.5)
    tails = "\n".join(
        f"Log tail of {d.log_file}:\n{log_tail(d.log_file)}"
        for d in daemons(paths)
        if d.binary in ("slurmctld", "slurmd")
    )
    raise SandboxError(
        f"Nodes not idle after {timeout:.0f}s (sinfo says {states or 'nothing'}). "
        f"Check the logs, then `manage.py sandbox down` and `up` again.\n{tails}"
    )


def job_ids(paths: Paths) -> list[str]:
    """The ids of the cluster's jobs not yet ended (those completing included); none when down."""
    ctld = next(daemon for daemon in daemons(paths) if daemon.binary == "slurmctld")
    if running_pid(ctld) is None or not paths.slurm_conf.exists():
        return []
    try:
        proc = subprocess.run(
            ["squeue", "--noheader", "--format=%A"],
            env=slurm_env(paths),
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return []
    return proc.stdout.split() if proc.returncode == 0 else []


def end_jobs(paths: Paths, timeout: float = 30) -> None:
    """Cancel the cluster's jobs and wait for their end: a job's processes outlive slurmd
    (a session's JupyterLab went on as its tenant after `down`)."""
    deadline = time.monotonic() + timeout
    while (jobs := job_ids(paths)) and time.monotonic() < deadline:
        subprocess.run(
            ["scancel", *jobs], env=slurm_env(paths), capture_output=True, timeout=15, check=False
        )
        time.sleep(0.5)
