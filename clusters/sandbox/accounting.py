"""slurmdbd on the sandbox's own MariaDB, so `sacct` and `sacctmgr` are real.

Everything lives under the state dir (data in `mariadb/`, the password in
`keys/`); MariaDB listens on loopback only. Used only when both `mariadbd`
and `slurmdbd` are installed and SANDBOX_ACCOUNTING is not "0". The second cluster
(clusters.sandbox.second) runs a slurmdbd of its own, through its own munged, with a
database and database user of its own on the same MariaDB (`Paths.database`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

from . import daemons as d
from .config import Paths, render_slurmdbd_conf
from .system import SandboxError, run, write_if_changed


def accounting_wanted() -> bool:
    if os.environ.get("SANDBOX_ACCOUNTING", "1") == "0":
        return False
    return all(shutil.which(binary) for binary in ("mariadbd", "mariadb-install-db", "slurmdbd"))


def _password(paths: Paths) -> str:
    if not paths.accounting_secret.exists():
        paths.accounting_secret.parent.mkdir(mode=0o700, exist_ok=True)
        fd = os.open(paths.accounting_secret, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(16))
    return paths.accounting_secret.read_text().strip()


def _sql(paths: Paths, statement: str) -> None:
    # root@localhost authenticates by the socket's peer uid: no password to keep.
    run(
        ["mariadb", "--no-defaults", f"--socket={paths.mariadb_socket}", "-u", "root",
         "-e", statement],
        timeout=30,
    )  # fmt: skip


def _wait_socket(paths: Paths, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        probe = subprocess.run(
            ["mariadb", "--no-defaults", f"--socket={paths.mariadb_socket}", "-u", "root",
             "-e", "SELECT 1"],
            capture_output=True, check=False, timeout=10,
        )  # fmt: skip
        if probe.returncode == 0:
            return
        time.sleep(0.2)
    raise SandboxError(
        f"MariaDB did not answer on {paths.mariadb_socket} within {timeout:.0f}s.\n"
        f"{d.log_tail(paths.log / 'mariadb.log')}"
    )


def ensure_database(paths: Paths) -> None:
    """Initialise (once) and start the sandbox's MariaDB, and give the slurmdbd of `paths`'
    cluster its database user, whose rights are on that cluster's database alone."""
    db = paths.database
    daemon = d.mariadb(paths)
    if not (db.mariadb / "mysql").is_dir():
        db.mariadb.mkdir(mode=0o700, exist_ok=True)
        run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={db.mariadb}", "--user=root",
             "--auth-root-authentication-method=socket", "--skip-test-db"],
            timeout=120,
        )  # fmt: skip
    if d.running_pid(daemon) is None:
        d.start(daemon, paths)
    _wait_socket(db)
    password = _password(paths)
    user = f"'{paths.layout.accounting_db_user}'@'127.0.0.1'"
    _sql(
        db,
        f"CREATE USER IF NOT EXISTS {user} IDENTIFIED BY '{password}'; "
        f"ALTER USER {user} IDENTIFIED BY '{password}'; "
        f"GRANT ALL ON {paths.layout.accounting_db}.* TO {user};",
    )


def ensure_slurmdbd(paths: Paths) -> None:
    """Write slurmdbd.conf (0600: it holds the password) and start slurmdbd."""
    daemon = d.slurmdbd(paths)
    changed = write_if_changed(
        paths.slurmdbd_conf, render_slurmdbd_conf(paths, _password(paths)), 0o600
    )
    if changed:
        d.stop(daemon)
    if d.running_pid(daemon) is None:
        d.start(daemon, paths)


def sacctmgr(paths: Paths, *args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sacctmgr", "--immediate", *args],
        env=d.slurm_env(paths),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def ensure_cluster_registered(paths: Paths, timeout: float = 30) -> None:
    """The cluster's record in slurmdbd; waits for slurmdbd to answer."""
    deadline = time.monotonic() + timeout
    proc = sacctmgr(paths, "--noheader", "--parsable2", "list", "cluster", "format=cluster")
    while proc.returncode != 0 and time.monotonic() < deadline:
        time.sleep(0.5)
        proc = sacctmgr(paths, "--noheader", "--parsable2", "list", "cluster", "format=cluster")
    if proc.returncode != 0:
        raise SandboxError(
            f"slurmdbd does not answer sacctmgr: {proc.stderr.strip()}\n"
            f"{d.log_tail(paths.log / 'slurmdbd.log')}"
        )
    if paths.layout.name not in proc.stdout.split():
        added = sacctmgr(paths, "add", "cluster", paths.layout.name)
        if added.returncode != 0 and "already exists" not in added.stdout:
            raise SandboxError(f"sacctmgr add cluster failed: {added.stdout}{added.stderr}")


def ensure_operator(paths: Paths, user: str) -> None:
    """Make `user` a Slurm operator: it sees every user's jobs even under PrivateData."""
    added = sacctmgr(paths, "add", "user", user, "account=root", "adminlevel=operator")
    if added.returncode != 0 and "Nothing new added" not in added.stdout:
        raise SandboxError(f"sacctmgr add user {user} failed: {added.stdout}{added.stderr}")
    if "Nothing new added" in added.stdout:  # it exists: keep its admin level current
        sacctmgr(paths, "modify", "user", "where", f"name={user}", "set", "adminlevel=operator")


def accounting_up(paths: Paths) -> None:
    """MariaDB and the slurmdbd of `paths`' cluster running (before its slurmctld is started
    or restarted)."""
    munged = next(x for x in d.daemons(paths) if x.name == "munged")
    if d.running_pid(munged) is None:
        d.start(munged, paths)  # slurmdbd authenticates through it
    ensure_database(paths)
    ensure_slurmdbd(paths)


def is_only_accounting_change(old: str, new: str) -> bool:
    """Whether two slurm.conf texts differ only in accounting lines (slurmctld-only restart)."""

    def rest(text: str) -> list[str]:
        return [
            line
            for line in text.splitlines()
            if not line.startswith(("Accounting", "JobAcctGather"))
            and not line.startswith("# For slurmdbd")
            and not line.startswith("# No AccountingStorageEnforce")
            and not line.startswith("# so turning accounting")
        ]

    return rest(old) == rest(new)


def read_text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
