"""A sandbox job reaches on this machine only what Slurm and sshd need (issue 33, point 5).

The sandbox runs its tenants' jobs on the portal's machine, where PostgreSQL trusts
local connections: a job that reached it could read the sessions table and open the
admin (issue 13). A deny-list of four ports let a job reach the machine's MariaDB as root
and other local brokers (issue 33). `sandbox up` now allows the tenants' uids only the
sandboxes' Slurm and sshd ports, the MASTER_PORT and ephemeral ranges (less every port of
the portal's and every other user's service there) and closes the socket directories
(clusters/sandbox/isolation.py); the portal itself, running as root, keeps them (this
test's own database connection is one).
"""

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from django.conf import settings as django_settings

from clusters.sandbox import isolation
from tests.helpers import slurm_name

PROBE = r"""
import json, os, socket, sys
ports = json.loads(sys.argv[1])
seen = {}
for port in ports:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        seen[port] = "open"
    except ConnectionRefusedError:
        seen[port] = "refused"
    except OSError as exc:
        seen[port] = type(exc).__name__
for path in ("/run/postgresql", "/run/redis", "/run/mysqld"):
    if os.path.isdir(path):
        try:
            os.listdir(path)
            seen[path] = "open"
        except PermissionError:
            seen[path] = "denied"
print("PROBE " + json.dumps(seen))
"""


def _probe(output: str) -> dict[str, str]:
    line = next(x for x in output.splitlines() if x.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


# Lines of this machine's /proc/net/tcp6 and /proc/net/tcp: ::1 port 6379 (root) and 4369
# (uid 106) listening, slurmd's 17001 (root) listening, a TIME_WAIT and an ESTABLISHED
# socket on 127.0.0.1; and, in their format, a tenant's own listener on 25000 (uid 1001).
PROC_TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:18EB 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5290 1 00000000d1fce927 100 0 0 10 0
   1: 00000000000000000000000001000000:1111 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000   106        0 5692 1 000000003984ff48 100 0 0 10 0
"""
PROC_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:4269 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 410977 1 00000000c26c5e5e 100 0 0 10 0
   1: 00000000:61A8 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 410978 1 00000000c26c5e5f 100 0 0 10 0
  17: 0100007F:4269 0100007F:85F4 06 00000000:00000000 03:00001366 00000000     0        0 0 3 00000000c93998a5
  18: 0100007F:18EB 0100007F:AE16 01 00000000:00000000 02:00007138 00000000     0        0 412886 4 00000000b63ef9c4 21 4 29 18 -1
"""


def test_the_portals_own_ports_are_closed(settings) -> None:
    settings.REDIS_URL = "redis://:secret@127.0.0.1:6390/4"
    assert {5432, 6379, 6390, 16306} <= isolation.service_ports()


def test_tenants_are_allowed_slurm_sshd_rendezvous_and_ephemeral_ports_only() -> None:
    allowed = isolation.allowed_ports(ephemeral=(32768, 60999))
    # sshd of both sandboxes; slurmctld, slurmd, slurmdbd inside the MASTER_PORT range.
    assert allowed == [(2222, 2222), (2232, 2232), (15000, 29999), (32768, 60999)]
    assert all(any(lo <= port <= hi for lo, hi in allowed) for port in isolation.slurm_ports())
    for service in (3306, 5432, 5672, 6379, 1883, 4222, 11211):
        assert not any(low <= service <= high for low, high in allowed)


def test_the_rules_refuse_closed_ports_before_allowing_and_everything_else_after() -> None:
    script = isolation.ruleset(
        [1001, 1002], frozenset({5432, 16306}), [(2222, 2222), (15000, 29999)]
    )
    assert script.startswith("table inet portal_sandbox\ndelete table inet portal_sandbox\n")
    lines = [line.strip() for line in script.splitlines()]
    assert "meta skuid { 1001, 1002 } jump tenant" in lines
    tenant = lines[lines.index("chain tenant {") + 1 : lines.index("chain refuse {")]
    assert tenant == [
        "ct state established,related return",
        "fib daddr type != local return",
        "meta l4proto { tcp, udp } th dport { 5432, 16306 } goto refuse",
        "meta l4proto { tcp, udp } th dport { 2222, 15000-29999 } return",
        "meta l4proto { tcp, udp } goto refuse",
        "}",
    ]


@pytest.mark.skipif(
    shutil.which("nft") is None or os.geteuid() != 0, reason="needs nft and root to check"
)
def test_nftables_takes_the_rules() -> None:
    """`nft -c` checks the script with the kernel and applies nothing (the sandbox's table stays)."""
    script = isolation.ruleset([os.geteuid()], isolation.service_ports(), isolation.allowed_ports())
    checked = subprocess.run(
        ["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stderr


# Run as root in a network namespace of its own: listeners on some ports, then the same
# connections as root and as `nobody`. Nothing it does reaches the host's network.
NETNS_PROBE = r"""
import json, os, socket, sys
ports = json.loads(sys.argv[1])
servers = []
for port in ports:
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen()
    servers.append(server)

def attempt(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError as exc:
        return type(exc).__name__

seen = {"root": {port: attempt(port) for port in ports}}
read, write = os.pipe()
if os.fork() == 0:
    os.setgid(65534)
    os.setuid(65534)
    os.write(write, json.dumps({port: attempt(port) for port in ports}).encode())
    os._exit(0)
os.wait()
os.close(write)
seen["tenant"] = json.loads(os.read(read, 65536))
print(json.dumps(seen))
"""


@pytest.mark.skipif(
    not all(shutil.which(tool) for tool in ("nft", "unshare", "ip")) or os.geteuid() != 0,
    reason="needs root, nft, unshare and ip",
)
def test_in_a_network_namespace_a_tenant_reaches_only_the_allowed_ports() -> None:
    """The rules themselves, in the kernel, on a loopback of their own (no sandbox needed)."""
    script = isolation.ruleset(
        [65534], frozenset({16306}), [(2222, 2222), (15000, 29999), (32768, 60999)]
    )
    # sshd's port, a rendezvous port, MariaDB's (inside the range but closed), another
    # local service's outside every range.
    ports = [2222, 20000, 16306, 12000]
    done = subprocess.run(
        [
            "unshare",
            "-n",
            "sh",
            "-c",
            'ip link set lo up && nft -f - && exec "$0" -c "$1" "$2"',
            sys.executable,
            NETNS_PROBE,
            json.dumps(ports),
        ],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["root"] == {str(port): "open" for port in ports}
    assert seen["tenant"] == {
        "2222": "open",
        "20000": "open",
        "16306": "refused",
        "12000": "refused",
    }


def test_ports_others_listen_on_are_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "tcp6").write_text(PROC_TCP6)
    (tmp_path / "tcp").write_text(PROC_TCP)
    (tmp_path / "udp").write_text("  sl  local_address rem_address   st\n")
    # 6379 and 4369 (root, uid 106) and 17001 (root); not 25000 (the tenant's own
    # listener, uid 1001), nor the TIME_WAIT and ESTABLISHED sockets' 6379 and 17001.
    assert isolation.others_listening([1001], proc_net=tmp_path) == {6379, 4369, 17001}


def test_status_says_isolation_is_off_where_nft_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nft on it
    said = isolation.describe()
    assert said.startswith("OFF (nft cannot run: [Errno 2] No such file or directory")
    assert "can reach every service on this machine" in said


@pytest.fixture
def root_listener() -> Iterator[int]:
    """A service of root's on a port no allowed range covers, as a local broker would be."""
    allowed = isolation.allowed_ports()
    with socket.socket() as server:
        for port in range(10000, 15000):
            if any(lo <= port <= hi for lo, hi in allowed):
                continue
            try:
                server.bind(("127.0.0.1", port))
            except OSError:
                continue
            server.listen()
            yield port
            return
    pytest.fail("no free port in 10000-14999")


@pytest.mark.sandbox
def test_a_job_and_a_shell_of_a_tenant_reach_only_what_slurm_and_sshd_need(
    sandbox_info, alice, root_listener: int
) -> None:
    database_port = int(django_settings.DATABASES["default"]["PORT"] or 5432)
    redis_port = urlsplit(django_settings.REDIS_URL).port or 6379
    services = isolation.service_ports()
    assert {database_port, redis_port} <= services
    said = isolation.describe()
    assert said.startswith("on:") and "15000-29999" in said, said
    # Every local service `up` found (MySQL, RabbitMQ, NATS... where this machine runs them),
    # refused by name; every one listening now outside the allowed ranges; and root's
    # listener started after `up`. A server another test started since `up` inside an
    # allowed range (a daphne on an ephemeral port) is as reachable as srun's own ports.
    allowed = isolation.allowed_ports()
    listening = isolation.others_listening(isolation.tenant_uids()) - isolation.slurm_ports()
    outside = {p for p in listening if not any(low <= p <= high for low, high in allowed)}
    others = outside | isolation.closed_ports()
    ports = sorted(services | others | {root_listener})
    argv = shlex.quote(json.dumps(ports))
    alice.upload(".isolation-probe.py", PROBE.encode(), mode=0o600)

    # In alice's own shell on the login node (over sshd), and inside a Slurm job on a
    # compute node (srun to slurmctld and slurmd): what they need still works.
    shell = _probe(alice.run(f"python3 .isolation-probe.py {argv}").text)
    job = alice.run(
        f"srun --job-name={slurm_name('isolation')} -N1 -n1 --time=1 "
        f"python3 .isolation-probe.py {argv}",
        timeout=120,
    )
    in_job = _probe(job.text)
    for seen in (shell, in_job):
        assert {str(port): seen[str(port)] for port in ports} == {
            str(port): "refused" for port in ports
        }, seen
        assert all(seen[path] == "denied" for path in seen if path.startswith("/")), seen
    # Root (the portal's servers) still reaches them.
    for port in ports:
        if port in (database_port, redis_port):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
