"""The production shape (docker-compose.yml) on one machine, from Debian's packages.

No container runtime: Caddy (Debian's `caddy`) in front with TLS from its internal CA,
daphne, a Celery worker and a Celery beat as the system user `portal` (on the
Python it can reach: devtools/portal_user.py), Redis (Debian's `redis-server`) with a
password, and a PostgreSQL role with a password and a database of its own, made through
a superuser's URL (the test's: a private cluster that checks passwords,
devtools/postgres_cluster.py). docs/production-shape.md
says what each process is; tests/e2e/test_production_shape.py runs it.

Every process runs in a session of its own and carries `PORTAL_SERVER_TAG`, so that
`devtools.servers.leftover_processes(tag)` finds whatever outlived `running_shape`.
"""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit

import psycopg
import redis
from cryptography.fernet import Fernet
from psycopg import sql

from devtools.portal_user import PORTAL_USER, ensure_system_user, python_for
from devtools.servers import ROOT, TAG_VARIABLE, Server, answers, free_port

# Debian's own users for its packages' daemons (made by their postinst).
CADDY_USER = "caddy"
REDIS_USER = "redis"
CADDY = Path("/usr/bin/caddy")
REDIS_SERVER = Path("/usr/bin/redis-server")
CADDYFILE = ROOT / "deploy" / "caddy" / "Caddyfile"
HOST = "localhost"
WORKER_OPTIONS = ["--loglevel=INFO", "--concurrency=2", "--without-gossip", "--without-mingle"]


def private_dir(parent: Path, name: str, user: str) -> Path:
    """parent/name, 0700 and owned by `user`: only that user's processes read it."""
    path = parent / name
    path.mkdir(mode=0o700)
    account = pwd.getpwnam(user)
    os.chown(path, account.pw_uid, account.pw_gid)
    return path


def owned_file(path: Path, text: str, user: str) -> Path:
    """A file only `user` reads (0600), with `text`."""
    path.touch(mode=0o600)
    path.write_text(text)
    account = pwd.getpwnam(user)
    os.chown(path, account.pw_uid, account.pw_gid)
    return path


def process(
    name: str,
    argv: list[str],
    user: str,
    env: dict[str, str],
    logs: Path,
    ready: Callable[[], bool],
) -> Server:
    """One daemon as a user of its own, in a session of its own, its output in a log."""
    return Server(name, [], env, logs, ready, argv=argv, user=user)


@contextmanager
def postgres_database(name: str, admin_url: str) -> Iterator[str]:
    """A new role `name` with a random password and its own database `name`, made through
    `admin_url` (a superuser's) and dropped after. Yields the DATABASE_URL that logs in
    as that role with its password, on the same server."""
    password = secrets.token_urlsafe(24)
    server = urlsplit(admin_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(
            sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                sql.Identifier(name), sql.Literal(password)
            )
        )
        try:
            admin.execute(
                sql.SQL("CREATE DATABASE {} OWNER {}").format(
                    sql.Identifier(name), sql.Identifier(name)
                )
            )
            where = f"{server.hostname or '127.0.0.1'}:{server.port or 5432}"
            yield f"postgres://{name}:{password}@{where}/{name}"
        finally:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
            admin.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def redis_process(state: Path, logs: Path, env: Mapping[str, str]) -> tuple[Server, str]:
    """redis-server as Debian's `redis` user on a free port, its password in its config
    file (not on the command line); and the URL (with the password) of its database 0."""
    port, password = free_port(), secrets.token_urlsafe(24)
    home = private_dir(state, "redis", REDIS_USER)
    conf = owned_file(
        home / "redis.conf",
        f'bind 127.0.0.1\nport {port}\nrequirepass {password}\nsave ""\n'
        f"appendonly no\ndir {home}\n",
        REDIS_USER,
    )
    url = f"redis://:{password}@127.0.0.1:{port}/0"

    def ready() -> bool:
        if not answers(port):
            return False
        try:
            return bool(redis.Redis.from_url(url).ping())
        except redis.RedisError:
            return False

    return process("redis", [str(REDIS_SERVER), str(conf)], REDIS_USER, dict(env), logs, ready), url


def caddyfile_for(https_port: int, http_port: int, upstream: int) -> str:
    """deploy/caddy/Caddyfile with only its host and ports changed, behind global options
    that keep it to itself on a shared machine: no admin endpoint, the loopback only, no
    port 80, no system trust store."""
    text = CADDYFILE.read_text()
    for old, new in (
        ("{$PORTAL_DOMAIN:localhost} {", f"{HOST}:{https_port} {{"),
        ("reverse_proxy web:8000", f"reverse_proxy 127.0.0.1:{upstream}"),
    ):
        if text.count(old) != 1:
            raise ValueError(f"{CADDYFILE} no longer has `{old}` once: update {__name__}")
        text = text.replace(old, new)
    options = (
        f"{{\n\tadmin off\n\tdefault_bind 127.0.0.1\n\thttp_port {http_port}\n"
        "\tskip_install_trust\n}\n\n"
    )
    return options + text


def caddy_root(data: Path) -> Path:
    """Caddy's internal CA's root certificate, under its data directory."""
    return data / "caddy" / "pki" / "authorities" / "local" / "root.crt"


def tls_verified(port: int, root: Path) -> str:
    """A TLS handshake with localhost:port verified against `root` alone (chain and host
    name, Python's ssl module); the peer certificate's issuer's common name."""
    context = ssl.create_default_context(cafile=str(root))
    with (
        socket.create_connection(("127.0.0.1", port), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=HOST) as tls,
    ):
        certificate = tls.getpeercert() or {}
    issuer = cast("tuple[tuple[tuple[str, str], ...], ...]", certificate.get("issuer", ()))
    return next((value for rdn in issuer for key, value in rdn if key == "commonName"), "")


def caddy_process(
    state: Path, logs: Path, env: Mapping[str, str], *, port: int, upstream: int
) -> tuple[Server, Path]:
    """Caddy as Debian's `caddy` user on `port`, its data (the internal CA) in `state`."""
    home = private_dir(state, "caddy", CADDY_USER)
    config = owned_file(home / "Caddyfile", caddyfile_for(port, free_port(), upstream), CADDY_USER)
    caddy_env = {**env, "HOME": str(home), "XDG_DATA_HOME": str(home / "data")}
    caddy_env["XDG_CONFIG_HOME"] = str(home)
    argv = [str(CADDY), "run", "--config", str(config), "--adapter", "caddyfile"]

    def ready() -> bool:
        root = caddy_root(home / "data")
        if not (answers(port) and root.exists()):
            return False
        with suppress(OSError):
            tls_verified(port, root)
            return True
        return False

    return process("caddy", argv, CADDY_USER, caddy_env, logs, ready), caddy_root(home / "data")


def log_says(process: Server, text: str) -> Callable[[], bool]:
    return lambda: text in process.log_tail(400)


@dataclass
class Shape:
    """The running shape: its public URL, Caddy's root certificate, the portal's
    environment, and its processes (their logs tell what went wrong)."""

    url: str
    port: int
    root_certificate: Path
    env: dict[str, str]
    python: list[str]
    processes: list[Server]
    postgres_admin_url: str

    def manage(self, *args: str, stdin: str = "", timeout: float = 600) -> str:
        """`manage.py args` as `portal` with the shape's environment; its output."""
        done = subprocess.run(
            [*self.python, "manage.py", *args],
            cwd=ROOT,
            env=self.env,
            user=PORTAL_USER,
            group=pwd.getpwnam(PORTAL_USER).pw_gid,
            extra_groups=[],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
        return done.stdout + done.stderr

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.log_tail()}" for p in self.processes)


@contextmanager
def running_shape(
    *,
    tag: str,
    name: str,
    port: int,
    postgres_admin_url: str,
    extra_env: Mapping[str, str] | None = None,
) -> Iterator[Shape]:
    """The whole shape behind https://localhost:port, migrated and its static files
    collected; `name` is the PostgreSQL role and database, made through
    `postgres_admin_url`. Everything is stopped, the role and database dropped and the
    state directory removed when the block ends."""
    ensure_system_user(PORTAL_USER)
    with ExitStack() as stack:
        state = Path(tempfile.mkdtemp(prefix="portal-shape-"))
        stack.callback(shutil.rmtree, state, True)
        state.chmod(0o711)  # each user's own directory below, 0700
        logs = state / "logs"
        logs.mkdir(mode=0o700)
        base = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", TAG_VARIABLE: tag}
        processes: list[Server] = []

        def start(server: Server) -> None:
            processes.append(server)
            stack.callback(server.stop)
            server.start(timeout=120)

        store, redis_url = redis_process(state, logs, base)
        start(store)
        database_url = stack.enter_context(postgres_database(name, postgres_admin_url))
        # The virtualenv's interpreter, or its view on Debian's python3 where the former
        # is out of `portal`'s reach (under /root): devtools/portal_user.py.
        python = [str(python_for(PORTAL_USER, Path(sys.prefix), ROOT))]
        home = private_dir(state, "portal", PORTAL_USER)
        url = f"https://{HOST}:{port}"
        env = {
            **base,
            "HOME": str(home),
            "PYTHONDONTWRITEBYTECODE": "1",
            "DJANGO_SETTINGS_MODULE": "portal.settings.production",
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(48),
            "FIELD_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
            "DATABASE_URL": database_url,
            "REDIS_URL": redis_url,
            "CELERY_BROKER_URL": redis_url,
            "DJANGO_ALLOWED_HOSTS": HOST,
            "DJANGO_CSRF_TRUSTED_ORIGINS": url,
            "PORTAL_URL": url,
            # Only Caddy reaches daphne (on the loopback), and it sets the header itself.
            "DJANGO_BEHIND_PROXY": "true",
            "DJANGO_STATIC_ROOT": str(home / "static"),
            "CODE_SNAPSHOT_DIR": str(home / "code"),
            "PORTAL_METRICS_TOKEN": secrets.token_urlsafe(32),
            **(extra_env or {}),
        }
        upstream = free_port()
        proxy, root = caddy_process(state, logs, base, port=port, upstream=upstream)
        shape = Shape(url, port, root, env, python, processes, postgres_admin_url)
        shape.manage("migrate", "--noinput")
        shape.manage("collectstatic", "--noinput")

        web = [*python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(upstream)]
        start(
            process(
                "daphne",
                [*web, "portal.asgi:application"],
                PORTAL_USER,
                env,
                logs,
                lambda: answers(upstream),
            )
        )
        celery = [*python, "-m", "celery", "-A", "portal"]
        worker = process(
            "worker",
            [*celery, "worker", *WORKER_OPTIONS, "-n", f"{name}@localhost"],
            PORTAL_USER,
            env,
            logs,
            lambda: False,
        )
        worker.ready = log_says(worker, " ready.")
        start(worker)
        tenants = process(
            "tenants",
            [
                *celery,
                "worker",
                *WORKER_OPTIONS,
                "-Q",
                "tenants",
                "-n",
                f"tenants-{name}@localhost",
            ],
            PORTAL_USER,
            env,
            logs,
            lambda: False,
        )
        tenants.ready = log_says(tenants, " ready.")
        start(tenants)
        beat = process(
            "beat",
            [*celery, "beat", "--loglevel=INFO", f"--schedule={home / 'celerybeat-schedule'}"],
            PORTAL_USER,
            env,
            logs,
            lambda: False,
        )
        beat.ready = log_says(beat, "beat: Starting")
        start(beat)
        start(proxy)
        yield shape
