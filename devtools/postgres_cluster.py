"""A private PostgreSQL cluster that checks passwords, for the production shape's test.

The machine's own PostgreSQL may trust every connection on the loopback (this one
does), so a role's password there is stored but never checked. This cluster is made
with Debian's `initdb` in a temporary folder, as the `postgres` user, on a free port;
its `pg_hba.conf` asks every connection, TCP or socket, for a SCRAM-SHA-256 password.
It is stopped and its folder removed when the block ends, whatever happened.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import psycopg

from devtools.servers import Server

POSTGRES_USER = "postgres"  # Debian's postgresql package makes it
DEBIAN_POSTGRES = Path("/usr/lib/postgresql")
PG_HBA = """\
# Every connection gives its role's password (SCRAM-SHA-256); nothing is trusted.
local all all scram-sha-256
host all all 127.0.0.1/32 scram-sha-256
host all all ::1/128 scram-sha-256
"""


@dataclass(frozen=True)
class PrivatePostgres:
    """The running cluster: its superuser's URL (with the password), and its folder."""

    url: str
    home: Path


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (/usr/lib/postgresql/N/bin), if any."""
    found = [path / "bin" for path in DEBIAN_POSTGRES.glob("*") if (path / "bin/initdb").exists()]
    return max(found, key=lambda path: int(path.parent.name), default=None)


def _as_postgres(argv: list[str], cwd: Path) -> None:
    account = pwd.getpwnam(POSTGRES_USER)
    done = subprocess.run(
        argv,
        cwd=cwd,
        user=account.pw_uid,
        group=account.pw_gid,
        extra_groups=[],
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")


def accepts(url: str) -> bool:
    """Whether the server lets `url` (its role and password) in."""
    try:
        with psycopg.connect(url, connect_timeout=5):
            return True
    except psycopg.OperationalError:
        return False


@contextmanager
def private_postgres(env: Mapping[str, str], port: int) -> Iterator[PrivatePostgres]:
    """A new cluster on 127.0.0.1:`port` (its processes carry `env`, a tag among it)."""
    binaries = postgres_bin()
    if binaries is None:
        raise RuntimeError(f"no PostgreSQL under {DEBIAN_POSTGRES}: apt-get install postgresql")
    account = pwd.getpwnam(POSTGRES_USER)
    password = secrets.token_urlsafe(24)
    with ExitStack() as stack:
        home = Path(tempfile.mkdtemp(prefix="portal-postgres-"))
        stack.callback(shutil.rmtree, home, True)
        os.chown(home, account.pw_uid, account.pw_gid)
        password_file = home / "superuser-password"
        password_file.touch(mode=0o600)
        password_file.write_text(password)
        os.chown(password_file, account.pw_uid, account.pw_gid)
        data = home / "data"
        initdb = [str(binaries / "initdb"), "-D", str(data), "-U", POSTGRES_USER]
        initdb += ["--pwfile", str(password_file), "--auth=scram-sha-256", "-E", "UTF8"]
        _as_postgres([*initdb, "--locale=C.UTF-8", "--no-sync"], home)
        password_file.unlink()
        (data / "pg_hba.conf").write_text(PG_HBA)
        url = f"postgresql://{POSTGRES_USER}:{password}@127.0.0.1:{port}/postgres"
        options = ["-p", str(port), "-k", str(home), "-c", "listen_addresses=127.0.0.1"]
        server = Server(
            "postgres",
            [],
            {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **env},
            home,
            lambda: accepts(url),
            argv=[str(binaries / "postgres"), "-D", str(data), *options],
            cwd=home,
            user=POSTGRES_USER,
        )
        stack.callback(server.stop)
        # First a fast shutdown (SIGINT: sessions ended, no wait for them); stop() then
        # waits for it, and kills what is left.
        stack.callback(_signal, server, signal.SIGINT)
        server.start(timeout=120)
        yield PrivatePostgres(url, home)


def _signal(server: Server, signum: int) -> None:
    if server.proc is not None and server.proc.poll() is None:
        with suppress(ProcessLookupError):
            os.kill(server.proc.pid, signum)
