"""The sandbox's tenants reach, on this machine, only what Slurm and sshd need.

On a real site the cluster's nodes and the portal's database are different machines,
and a job reaches the portal only through its web address. The sandbox runs its
jobs on the portal's own machine, as the tenants' Unix users, where PostgreSQL may
trust any local connection, Redis may have no password and MariaDB lets root in
without one: a job could read the sessions table or write into the cache. A list
of ports to close missed every service it did not name, so `up` allows instead,
for the tenants' uids only (an nftables table of its own, `inet portal_sandbox`,
matched by the socket owner's uid, refused with a reset):

- to an address of this machine, TCP and UDP to the sandboxes' sshd, slurmctld,
  slurmd and slurmdbd ports, the range a job's MASTER_PORT comes from (torchrun's
  rendezvous) and the ephemeral range (srun's own listening ports, NCCL's and
  Gloo's), and replies on connections made to the tenant; nothing else. The
  portal's database and Redis, PostgreSQL's and Redis's usual ports, MariaDB's and
  every port another user listens on when `up` runs (but Slurm's and sshd's) are
  refused before anything is allowed, even where a range covers them;
- other machines are the site network's matter and are not filtered here;
- the local socket directories of PostgreSQL, Redis and MySQL/MariaDB: a POSIX ACL
  entry per tenant with no rights (others keep theirs).

The portal's own account, root and every other user keep their access. `down` takes
both away again. Where the machine cannot do it (no nftables, no CAP_NET_ADMIN) `up`
logs why and `status` says that isolation is off and what tenants can then reach;
the suite's isolation test fails there.
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

from portal_lib.rendezvous import RENDEZVOUS_PORTS

from .config import MARIADB_PORT, SANDBOX, SECOND, USERS, Layout
from .system import SandboxError, run

logger = logging.getLogger(__name__)

TABLE = "portal_sandbox"
# PostgreSQL's and Redis's usual ports: closed even where the portal runs on SQLite.
USUAL_PORTS = frozenset({5432, 6379})
SOCKET_DIRS = (Path("/run/postgresql"), Path("/run/redis"), Path("/run/mysqld"))
# Where a job's MASTER_PORT comes from (jobs.scripts, the DDP example).
JOB_RENDEZVOUS_PORTS = RENDEZVOUS_PORTS
# Linux's default ephemeral range, when /proc does not say.
EPHEMERAL_PORTS = (32768, 60999)
PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")

PortRange = tuple[int, int]


def _url_port(url: str, default: int) -> int | None:
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "postgres", "postgresql"):
        return None
    try:
        return parts.port or default
    except ValueError:
        return None


def service_ports() -> frozenset[int]:
    """Ports refused first, even inside an allowed range: the portal's database and Redis,
    MariaDB's, and PostgreSQL's and Redis's usual ones."""
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


def slurm_ports(layouts: Iterable[Layout] = (SANDBOX, SECOND)) -> frozenset[int]:
    """The ports of the sandboxes' sshd, slurmctld, slurmd and slurmdbd: what tenants use."""
    ports: set[int] = set()
    for layout in layouts:
        ports |= {layout.ssh_port, layout.slurmctld_port, layout.slurmdbd_port}
        ports |= {layout.slurmd_port(node) for node in layout.nodes}
    return frozenset(ports)


def ephemeral_ports(path: Path = PORT_RANGE_FILE) -> PortRange:
    """The kernel's ephemeral range: srun's listening ports and NCCL's come from it."""
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return EPHEMERAL_PORTS
    return low, high


# Sockets in /proc/net: TCP's LISTEN state, and UDP's unconnected one.
LISTENING = {"tcp": "0A", "tcp6": "0A", "udp": "07", "udp6": "07"}
PROC_NET = Path("/proc/net")


def others_listening(tenants: Iterable[int], proc_net: Path = PROC_NET) -> frozenset[int]:
    """Local ports that a user other than the tenants listens on now (from /proc/net).

    Inside an allowed range such a port is a service of someone else's (a broker, a
    database on a port of its own), so `close` refuses it too.
    """
    skip = set(tenants)
    ports: set[int] = set()
    for name, state in LISTENING.items():
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[3] == state and int(fields[7]) not in skip:
                ports.add(int(fields[1].rpartition(":")[2], 16))
    return frozenset(ports)


def allowed_ports(ephemeral: PortRange | None = None) -> list[PortRange]:
    """What a tenant may reach on this machine, as merged ranges."""
    ranges = [(port, port) for port in slurm_ports()]
    ranges += [JOB_RENDEZVOUS_PORTS, ephemeral or ephemeral_ports()]
    merged: list[PortRange] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def _port_text(ports: Iterable[PortRange]) -> str:
    return ", ".join(str(low) if low == high else f"{low}-{high}" for low, high in ports)


def ruleset(uids: list[int], closed: frozenset[int], allowed: list[PortRange]) -> str:
    """The nftables script: made anew each time (the first two lines drop an old one).

    For a tenant's packet: a reply on a connection made to it passes; to another
    machine passes; to a `closed` port is refused even inside an allowed range; to an
    `allowed` port passes; any other TCP or UDP to this machine is refused.
    """
    uid_set = ", ".join(str(uid) for uid in uids)
    closed_set = ", ".join(str(port) for port in sorted(closed))
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n"
        f"    meta skuid {{ {uid_set} }} jump tenant\n"
        "  }\n"
        "  chain tenant {\n"
        "    ct state established,related return\n"
        "    fib daddr type != local return\n"
        f"    meta l4proto {{ tcp, udp }} th dport {{ {closed_set} }} goto refuse\n"
        f"    meta l4proto {{ tcp, udp }} th dport {{ {_port_text(allowed)} }} return\n"
        "    meta l4proto { tcp, udp } goto refuse\n"
        "  }\n"
        "  chain refuse {\n"
        "    meta l4proto tcp reject with tcp reset\n"
        "    reject\n"
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
    """Allow the tenants only what Slurm and sshd need here; a line for the log and `status`."""
    names = list(users)
    uids = tenant_uids(names)
    allowed = allowed_ports()
    closed = service_ports() | (others_listening(uids) - slurm_ports())
    _nft(ruleset(uids, closed, allowed))
    entries = ",".join(f"u:{name}:---" for name in names)
    denied = []
    for directory in SOCKET_DIRS:
        if directory.is_dir():
            run(["setfacl", "-m", entries, str(directory)])
            denied.append(str(directory))
    return (
        f"tenants ({', '.join(names)}) reach on this machine only TCP and UDP ports "
        f"{_port_text(allowed)}, never {', '.join(str(port) for port in sorted(closed))}"
        + (f", nor {', '.join(denied)}" if denied else "")
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


OFF_MEANS = (
    "tenants' jobs and shells can reach every service on this machine "
    "(the portal's PostgreSQL and Redis, MariaDB)"
)


def describe() -> str:
    """'on: ...' from the live ruleset, or 'OFF (why): what that means' (for `status`)."""
    try:
        proc = subprocess.run(
            ["nft", "list", "table", "inet", TABLE], capture_output=True, text=True, check=False
        )
    except OSError as exc:
        return f"OFF (nft cannot run: {exc}; `bin/dev` installs nftables): {OFF_MEANS}"
    if proc.returncode != 0:
        reason = proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else "no table"
        return f"OFF (no nftables table {TABLE}: {reason}; `sandbox up` adds it): {OFF_MEANS}"
    rules = [line.strip() for line in proc.stdout.splitlines()]
    jump = next((line for line in rules if "skuid" in line and "jump tenant" in line), "")
    allow = next((line for line in rules if "dport" in line and line.endswith("return")), "")
    if not (jump and allow):
        older = next((line for line in rules if "skuid" in line), "")
        if older:
            return (
                f"PARTIAL (an older deny-list: {older}; `sandbox up` replaces it): "
                "tenants can reach every local service it does not name"
            )
        return f"OFF (the table {TABLE} has no allow-list): {OFF_MEANS}"
    return f"on: {jump}; on this machine only {allow.removesuffix(' return')}"


def closed_ports() -> frozenset[int]:
    """The ports the live ruleset refuses by name (its `goto refuse` set); none when off."""
    try:
        proc = subprocess.run(
            ["nft", "list", "table", "inet", TABLE], capture_output=True, text=True, check=False
        )
    except OSError:
        return frozenset()
    ports: set[int] = set()
    for line in proc.stdout.splitlines():
        if "dport {" in line and line.strip().endswith("goto refuse"):
            listed = line.split("dport {", 1)[1].split("}", 1)[0]
            for item in listed.split(","):
                low, _, high = item.strip().partition("-")
                ports.update(range(int(low), int(high or low) + 1))
    return frozenset(ports)


__all__ = [
    "allowed_ports",
    "close",
    "closed_ports",
    "describe",
    "reopen",
    "ruleset",
    "service_ports",
]
