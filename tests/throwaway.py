"""Servers a test starts for itself, on a free port, and kills when it says (or at its end).

Tests that take Redis or PostgreSQL away do it to a server of their own, never to the
one the rest of the suite shares.
"""

import os
import shutil
import subprocess
import time
from contextlib import suppress
from pathlib import Path

import pytest
import redis
from celery import current_app

from devtools.servers import free_port, wait_until


class ThrowawayRedis:
    """A redis-server without persistence: a restart comes back empty, as after a crash."""

    def __init__(self) -> None:
        server = shutil.which("redis-server")
        if server is None:
            pytest.skip("redis-server is not installed")
        self.server = server
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.client = redis.Redis.from_url(self.url)
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        """Start it (again, on the same port) and wait until it answers."""
        self.process = subprocess.Popen(
            [self.server, "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                self.client.ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def kill(self) -> None:
        """kill -9."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)


def use_broker(url: str) -> None:
    """Point this process's Celery app at `url`; its pools (made on first use) are made again."""
    current_app.conf.broker_url = url  # type: ignore[misc]
    current_app._pool = None  # type: ignore[attr-defined]
    current_app.amqp._producer_pool = None  # type: ignore[attr-defined]


POSTGRES_USER = "postgres"  # initdb and postgres refuse to run as root


class ThrowawayPostgres:
    """A PostgreSQL cluster of its own (initdb in `directory`), on a free loopback port."""

    def __init__(self, directory: Path) -> None:
        bindir = _postgres_bindir()
        if bindir is None:
            pytest.skip("PostgreSQL's initdb and pg_ctl are not installed")
        self.bindir = bindir
        self.data = directory / "data"
        self.port = free_port()
        self.log = directory / "postgres.log"
        directory.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(directory, POSTGRES_USER)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "-A",
            "trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        self.start()

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        argv = [str(self.bindir / tool), *args]
        if os.geteuid() == 0:
            argv = ["runuser", "-u", POSTGRES_USER, "--", *argv]
        subprocess.run(argv, check=True, capture_output=True, timeout=timeout)

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
        options += " -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")
        wait_until(self._answers, 30, f"PostgreSQL on port {self.port}")

    def _answers(self) -> bool:
        probe = subprocess.run(
            [str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
            capture_output=True,
        )
        return probe.returncode == 0

    def stop_immediately(self) -> None:
        """`pg_ctl -m immediate stop`: the server and every backend end at once, as a crash."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def url(self, name: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{name}"

    def copy_from(self, source_url: str, name: str) -> None:
        """A database `name` here, with the schema and rows of the one at `source_url`."""
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)
        dump = subprocess.run(
            [str(self.bindir / "pg_dump"), "--no-owner", "--no-privileges", source_url],
            check=True,
            capture_output=True,
            timeout=300,
        )
        subprocess.run(
            [str(self.bindir / "psql"), "-q", "-v", "ON_ERROR_STOP=1", self.url(name)],
            input=dump.stdout,
            check=True,
            capture_output=True,
            timeout=300,
        )

    def remove(self) -> None:
        """Stop it (if it runs) and delete its files."""
        if (self.data / "postmaster.pid").exists():
            with suppress(subprocess.SubprocessError):
                self.stop_immediately()
        shutil.rmtree(self.data.parent, ignore_errors=True)


def _postgres_bindir() -> Path | None:
    for candidate in [
        shutil.which("pg_ctl"),
        *sorted(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")),
    ]:
        if candidate and Path(candidate).exists():
            return Path(candidate).resolve().parent
    return None
