"""A real OpenLDAP server (Debian's slapd) for the single sign-on tests, started and stopped here.

slapd runs in the foreground (`-d 0`) on a free loopback port with its configuration and
database in a directory of the caller's, seeded from devtools/ldap_seed.ldif (people and
groups) before it starts. It carries the run's tag like the other servers
(devtools.servers), so that a leftover is found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from devtools.servers import Server, answers, free_port

SLAPD = Path("/usr/sbin/slapd")
SLAPADD = Path("/usr/sbin/slapadd")
SCHEMA = Path("/etc/ldap/schema")
MODULES = Path("/usr/lib/ldap")
SEED = Path(__file__).resolve().parent / "ldap_seed.ldif"

SUFFIX = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{SUFFIX}"
ADMIN_PASSWORD = "directory-admin"  # noqa: S105 - a throwaway test directory's
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
# The seeded people's passwords (devtools/ldap_seed.ldif).
PASSWORDS = {
    "alice": "alice-in-the-directory",
    "bob": "bob-in-the-directory",
    "erin": "erin-in-the-directory",
}

CONFIG = """\
include {schema}/core.schema
include {schema}/cosine.schema
include {schema}/nis.schema
include {schema}/inetorgperson.schema
modulepath {modules}
moduleload back_mdb
pidfile {state}/slapd.pid

database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "{admin}"
rootpw {password}
directory {state}/data
index objectClass,uid,member,entryUUID eq
# A password is checked by binding, never read; everything else is readable.
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
"""


def slapd_installed() -> bool:
    return SLAPD.exists() and SLAPADD.exists()


@dataclass(frozen=True)
class Directory:
    """A running directory: where it listens and how to read it."""

    url: str
    suffix: str = SUFFIX
    admin_dn: str = ADMIN_DN
    admin_password: str = ADMIN_PASSWORD
    people: str = PEOPLE
    groups: str = GROUPS

    def settings(self) -> dict[str, str]:
        """The portal's LDAP settings (portal/settings/sso.py) for this directory."""
        return {
            "LDAP_SERVER_URL": self.url,
            "LDAP_BIND_DN": self.admin_dn,
            "LDAP_BIND_PASSWORD": self.admin_password,
            "LDAP_USER_BASE": self.people,
            "LDAP_GROUP_BASE": self.groups,
        }


@contextmanager
def running_directory(
    state: Path, *, env: Mapping[str, str] | None = None, timeout: float = 30
) -> Iterator[Directory]:
    """slapd on a free port, seeded, until the block ends (stopped whatever happens)."""
    if not slapd_installed():
        raise FileNotFoundError(f"{SLAPD} is missing: install Debian's slapd (bin/dev does)")
    data = state / "data"
    shutil.rmtree(data, ignore_errors=True)
    data.mkdir(parents=True)
    config = state / "slapd.conf"
    config.write_text(
        CONFIG.format(
            schema=SCHEMA,
            modules=MODULES,
            state=state,
            suffix=SUFFIX,
            admin=ADMIN_DN,
            password=ADMIN_PASSWORD,
        )
    )
    subprocess.run(
        [str(SLAPADD), "-q", "-f", str(config), "-l", str(SEED)],
        check=True,
        capture_output=True,
    )
    port = free_port()
    url = f"ldap://127.0.0.1:{port}"
    slapd = Server(
        "slapd",
        [],
        {**os.environ, **(env or {})},
        state,
        ready=lambda: answers(port),
        argv=[str(SLAPD), "-d", "0", "-h", f"{url}/", "-f", str(config)],
    )
    slapd.start(timeout)
    try:
        yield Directory(url=url)
    finally:
        slapd.stop()
