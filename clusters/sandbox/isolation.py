"""The sandbox's tenants cannot reach the portal's own services on this machine.

On a real site the cluster's nodes and the portal's database are different machines,
and a job reaches the portal only through its web address. The sandbox runs its
jobs on the portal's own machine, as the tenants' Unix users, where PostgreSQL may
trust any local connection and Redis may have no password: a job could read the
sessions table or write into the cache. So `up` closes, for the tenants' uids only:

- TCP to the ports of the portal's database, Redis (broker, cache, channel layer)
  and the sandbox's own MariaDB, and PostgreSQL's and Redis's usual ports, on any
  address: an nftables table of its own (`inet portal_sandbox`), matched by the
  socket owner's uid, answered with a reset;
- the local socket directories of PostgreSQL, Redis and MySQL/MariaDB: a POSIX ACL
  entry per tenant with no rights (others keep theirs).

The portal's own account, root and every other user keep their access. `down` takes
both away again. Where the machine cannot do it (no nftables, no CAP_NET_ADMIN) `up`
logs why and `status` shows it; the suite's isolation test fails there.
"""

from __future__ import annotations

import contextlib
import logging
import pwd
import subprocess
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

from .config import MARIADB_PORT, USERS
from .system import SandboxError, run

logger = logging.getLogger(__name__)

TABLE = "portal_sandbox"
# PostgreSQL's and Redis's usual ports: closed even where the portal runs on SQLite.
USUAL_PORTS = frozenset({5432, 6379})
SOCKET_DIRS = (Path("/run/postgresql"), Path("/run/redis"), Path("/run/mysqld"))


def _url_port(url: str, default: int) -> int | None:
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "postgres", "postgresql"):
        return None
    try:
        return parts.port or default
    except ValueError:
        return None


def service_ports() -> frozenset[int]:
    """The ports a tenant must not reach: the portal's database and Redis, MariaDB's."""
    ports = set(USUAL_PORTS) | {MARIADB_PORT}
    database = settings.DATABASES["default"]
    if "postgresql" in database.get("ENGINE", ""):
        ports.add(int(database.get("PORT") or 5432))
    for url in (
        getattr(settings, "REDIS_URL", ""),
        getattr(settings, "CELERY_BROKER_URL", ""),
    ):
        if url and (port := _url_port(str(url), 6379)) is not None:
            ports.add(port)
    return frozenset(ports)


def tenant_uids(users: Iterable[str] = USERS) -> list[int]:
    return sorted(pwd.getpwnam(name).pw_uid for name in users)


def ruleset(uids: list[int], ports: frozenset[int]) -> str:
    """The nftables script: made anew each time (the first two lines drop an old one)."""
    uid_set = ", ".join(str(uid) for uid in uids)
    port_set = ", ".join(str(port) for port in sorted(ports))
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n"
        f"    meta skuid {{ {uid_set} }} tcp dport {{ {port_set} }} reject with tcp reset\n"
        "  }\n"
        "}\n"
    )


def _nft(script: str) -> None:
    try:
        proc = subprocess.run(
            ["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(f"nft could not run: {exc}") from exc
    if proc.returncode != 0:
        raise SandboxError(f"nft refused the tenant rules: {proc.stderr.strip()}")


def close(users: Iterable[str] = USERS) -> str:
    """Close the portal's services to the tenants; a line for the log and `status`."""
    names = list(users)
    ports = service_ports()
    _nft(ruleset(tenant_uids(names), ports))
    entries = ",".join(f"u:{name}:---" for name in names)
    closed = []
    for directory in SOCKET_DIRS:
        if directory.is_dir():
            run(["setfacl", "-m", entries, str(directory)])
            closed.append(str(directory))
    return (
        f"tenants ({', '.join(names)}) cannot reach TCP ports "
        f"{', '.join(str(port) for port in sorted(ports))}"
        + (f" nor {', '.join(closed)}" if closed else "")
    )


def reopen(users: Iterable[str] = USERS) -> None:
    """Take the rules away again (`down`); what is not there (or no tool) is no error."""
    commands = [["nft", "delete", "table", "inet", TABLE]]
    commands += [
        ["setfacl", "-x", f"u:{name}", str(directory)]
        for directory in SOCKET_DIRS
        if directory.is_dir()
        for name in users
    ]
    for command in commands:
        with contextlib.suppress(OSError):
            subprocess.run(command, capture_output=True, check=False)


def describe() -> str:
    """'on (ports ...)' or 'off', from the live ruleset (for `status`)."""
    try:
        proc = subprocess.run(
            ["nft", "list", "table", "inet", TABLE], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return f"off ({exc})"
    if proc.returncode != 0:
        return "off (no nftables table)"
    line = next((x.strip() for x in proc.stdout.splitlines() if "skuid" in x), "")
    return f"on: {line}" if line else "off (the table has no rule)"


__all__ = ["close", "describe", "reopen", "ruleset", "service_ports"]
