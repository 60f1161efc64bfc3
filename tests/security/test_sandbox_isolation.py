"""A sandbox job cannot reach the portal's own database and Redis on this machine.

The sandbox runs its tenants' jobs on the portal's machine, where PostgreSQL trusts
local connections: a job that reached it could read the sessions table and open the
admin (issue 13). `sandbox up` closes those ports and socket directories to the
tenants' uids (clusters/sandbox/isolation.py); the portal itself, running as root,
keeps them (this test's own database connection is one).
"""

import json
import shlex
import socket
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


def test_the_rules_name_the_tenants_and_the_portals_own_ports(settings) -> None:
    settings.REDIS_URL = "redis://:secret@127.0.0.1:6390/4"
    ports = isolation.service_ports()
    assert {5432, 6379, 6390} <= ports
    script = isolation.ruleset([1001, 1002], ports)
    assert "meta skuid { 1001, 1002 } tcp dport {" in script and "6390" in script
    assert script.startswith("table inet portal_sandbox\ndelete table inet portal_sandbox\n")


@pytest.mark.sandbox
def test_a_job_and_a_shell_of_a_tenant_are_refused_the_database_and_redis(
    sandbox_info, alice
) -> None:
    ports = sorted(isolation.service_ports())
    database_port = int(django_settings.DATABASES["default"]["PORT"] or 5432)
    redis_port = urlsplit(django_settings.REDIS_URL).port or 6379
    assert {database_port, redis_port} <= set(ports)
    assert isolation.describe().startswith("on:"), isolation.describe()
    argv = shlex.quote(json.dumps(ports))
    alice.upload(".isolation-probe.py", PROBE.encode(), mode=0o600)

    # In alice's own shell on the login node, and inside a Slurm job on a compute node.
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
