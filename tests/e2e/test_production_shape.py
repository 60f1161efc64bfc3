"""The production shape run for real (docs/production-shape.md), from Debian's packages.

Caddy (its internal CA) in front of daphne, a Celery worker and a Celery beat as the
system user `portal` with portal.settings.production, Redis with a password, and a
PostgreSQL role with a password and a database of its own, on a private PostgreSQL
cluster of the test's whose pg_hba.conf asks every connection for its password
(scram-sha-256): a wrong one is refused. The OpenID provider on the
directory signs people in. A person from LDAP signs in through it in Chromium over
HTTPS (her sign-in gives her a certificate account on the sandbox, whose login node
trusts this portal's CA: no private key held), submits a job to the sandbox cluster,
watches its log arrive over the job page's WebSocket (wss, through Caddy) and sees the
job end. Then everything stops: no
process of the shape (PostgreSQL's included) is left, the cluster's folder is removed.
"""

import json
import os
import re
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import psycopg
import pytest
import redis
from django.conf import settings

from clusters.certificates.authorities import sandbox_trust_path
from clusters.certificates.trust_file import trusted_keys_write
from devtools.ldap_server import PASSWORDS, Directory
from devtools.openid_provider import provider_installed, running_openid_provider
from devtools.postgres_cluster import postgres_bin, private_postgres
from devtools.production_shape import (
    CADDY,
    CADDY_USER,
    PORTAL_USER,
    Shape,
    running_shape,
    tls_verified,
)
from devtools.servers import TAG_VARIABLE, free_port, kill_processes, leftover_processes
from portal_lib.worker_queues import TENANTS_QUEUE, served_queues
from tests.fixtures.sandbox import cancel_jobs, run_jobs
from tests.helpers import QUEUE_WAIT, screenshot, wait_for, worker_tag

# Migrations, static files, five servers and a job on a shared sandbox: minutes when busy.
pytestmark = [pytest.mark.sandbox, pytest.mark.browser, pytest.mark.timeout(900)]

SITE = "Example GPU centre"
# This worker's own processes, role, database and run directories on the cluster.
TAG = f"{worker_tag()}-shape"
DATABASE = re.sub(r"\W", "_", f"portal_shape_{worker_tag()}").lower()

# Run by `manage.py shell` as `portal`: the sandbox registered in this database, with
# run directories of this test's own, its login node trusting the portal's CA; its
# stand-in people removed (here the people come from the directory); the project the
# directory's ml-team maps to.
REGISTER = """
import json
from datetime import timedelta
from decimal import Decimal
from types import SimpleNamespace
from django.contrib.auth.models import User
from clusters.models import Authentication, ClusterAccount
from clusters.services import cluster_register_sandbox
from projects.models import Project, Quota
info = SimpleNamespace(**json.loads({info!r}))
cluster = cluster_register_sandbox(info=info, authentication=Authentication.CERTIFICATE)
cluster.base_run_dir = {run_dir!r}
cluster.trusts_portal_ca = True
cluster.save(update_fields=["base_run_dir", "trusts_portal_ca"])
ClusterAccount.objects.filter(cluster=cluster, user__isnull=False).delete()
User.objects.filter(username__in=info.users).delete()
project = Project.objects.create(slug="vision", name="Vision models", slurm_account="vision")
Quota.objects.create(project=project, gpu_hours_per_period=Decimal("100"),
    max_concurrent_gpus=8, max_gpus_per_job=4, max_wall_time=timedelta(hours=12))
"""

# The people's cluster accounts: (portal user, cluster user, how it logs in, a key held?).
ACCOUNTS = """
from clusters.models import ClusterAccount
for a in ClusterAccount.objects.filter(user__isnull=False).select_related("user"):
    print("account", a.user.username, a.username, a.authentication, bool(a.private_key))
"""


# Run by `manage.py shell` as `portal`: the role its database connection logged in as.
CURRENT_USER = """
from django.db import connection
with connection.cursor() as cursor:
    cursor.execute("SELECT current_user")
    print("connected as", cursor.fetchone()[0])
"""


def _owner(pid: int) -> str:
    from pwd import getpwuid

    return getpwuid(os.stat(f"/proc/{pid}").st_uid).pw_name


@pytest.fixture
def shape(
    sandbox_info, directory: Directory, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shape]:
    """The shape behind Caddy, the sandbox registered in its database; stopped after,
    whatever happened, and nothing of it left running."""
    if not CADDY.exists():
        pytest.skip("Debian's caddy is not installed (make test installs it as root)")
    if not provider_installed():
        pytest.skip("node or the provider's npm packages are missing (bin/dev installs them)")
    if postgres_bin() is None:
        pytest.skip("Debian's postgresql is not installed (make test installs it as root)")
    port = free_port()
    run_dir = f"{sandbox_info.base_run_dir.rstrip('/')}/{TAG}"
    try:
        with (
            running_openid_provider(
                Path(tmp_path_factory.mktemp("shape-provider")),
                directory=directory,
                portal_url=f"https://localhost:{port}",
                env={TAG_VARIABLE: TAG},
            ) as provider,
            private_postgres({TAG_VARIABLE: TAG}, free_port()) as postgres,
            running_shape(
                tag=TAG,
                name=DATABASE,
                port=port,
                postgres_admin_url=postgres.url,
                extra_env={
                    **provider.settings(),
                    "SSO_SITE_NAME": SITE,
                    "SSO_GROUP_PROJECTS": '{"ml-team": {"project": "vision", "role": "member"}}',
                    "SSO_STAFF_GROUP": "hpc-staff",
                    # A site has no sandbox: `ssh_ca` leaves the login node's file to root.
                    "SANDBOX_STATE_DIR": "/nonexistent/sandbox",
                },
            ) as running,
        ):
            info = json.dumps(asdict(sandbox_info))
            running.manage("shell", stdin=REGISTER.format(info=info, run_dir=run_dir))
            # The portal's CA, and its lines in the login node's TrustedUserCAKeys file,
            # written as a site's admin would (root), beside other portals' lines.
            running.manage("ssh_ca", "create")
            said = running.manage("ssh_ca", "public-keys").splitlines()
            lines = [line for line in said if f" portal-ca:{DATABASE}:" in line]
            assert lines, said
            trusted_keys_write(path=sandbox_trust_path(), owner=DATABASE, lines=lines)
            try:
                yield running
            finally:
                trusted_keys_write(path=sandbox_trust_path(), owner=DATABASE, lines=[])
                state_dir = settings.SANDBOX_STATE_DIR
                cancel_jobs(state_dir, [line.split()[0] for line in run_jobs(state_dir, TAG)])
    finally:
        left = leftover_processes(TAG)
        kill_processes([pid for pid, _ in left])
    assert left == [], f"the shape left processes running: {left}"
    assert not postgres.home.exists(), f"the private cluster's {postgres.home} is still there"


def _secured(shape: Shape) -> None:
    """What production demands held: no warning from check --deploy, the services as
    `portal`, Redis and PostgreSQL asking for their passwords, TLS verified against
    Caddy's root."""
    checked = shape.manage("check", "--deploy")
    assert "System check identified no issues" in checked and "WARNING" not in checked, checked
    owners = {p.name: _owner(p.proc.pid) for p in shape.processes if p.proc is not None}
    assert owners == {
        "redis": "redis",
        "daphne": PORTAL_USER,
        "worker": PORTAL_USER,
        "tenants": PORTAL_USER,
        "beat": PORTAL_USER,
        "caddy": CADDY_USER,
    }
    redis_url = shape.env["REDIS_URL"]
    with pytest.raises(redis.AuthenticationError):
        redis.Redis.from_url(re.sub(r"//:[^@]+@", "//", redis_url)).ping()
    assert redis.Redis.from_url(redis_url).ping()
    # A tenant's tasks (a session's kernels, a webhook) go to the worker of their own.
    served = lambda: TENANTS_QUEUE in served_queues(redis.Redis.from_url(redis_url))  # noqa: E731
    wait_for(served, 30, "the tenants' worker taking its queue")
    # PostgreSQL checks the role's password (scram-sha-256): a wrong one is refused, and
    # the portal, as `portal`, connects with its own.
    database_url = shape.env["DATABASE_URL"]
    assert f"//{DATABASE}:" in database_url
    wrong = re.sub(r"(//[^:/]+:)[^@]+@", r"\1not-the-password@", database_url)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(wrong, connect_timeout=10).close()
    said = shape.manage("shell", "-c", CURRENT_USER)
    assert f"connected as {DATABASE}" in said, said
    with psycopg.connect(shape.postgres_admin_url) as admin:
        (stored,) = admin.execute(
            "SELECT rolpassword FROM pg_authid WHERE rolname = %s", (DATABASE,)
        ).fetchone() or ("",)
    assert stored.startswith("SCRAM-SHA-256$")
    # The chain and the host name, against Caddy's own root and nothing else.
    assert tls_verified(shape.port, shape.root_certificate).startswith("Caddy Local Authority")


def test_a_directory_person_signs_in_submits_and_watches_over_https(shape: Shape, browser) -> None:
    # TLS was verified above; Chromium has no trust store of the test's to add the root to.
    context = browser.new_context(ignore_https_errors=True, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    page.set_default_timeout(30_000)
    sockets: list = []
    frames: list[str] = []

    def opened(socket) -> None:
        sockets.append(socket)
        socket.on("framereceived", lambda payload: frames.append(str(payload)))

    page.on("websocket", opened)
    try:
        _secured(shape)
        first = page.goto(f"{shape.url}/")
        assert first is not None
        assert "max-age=31536000" in (first.header_value("strict-transport-security") or "")
        assert "script-src 'self'" in (first.header_value("content-security-policy") or "")

        page.get_by_role("link", name=f"Sign in with {SITE}").click()
        page.get_by_label("Directory user name").fill("alice")
        page.get_by_label("Directory password").fill(PASSWORDS["alice"])
        page.get_by_role("button", name="Sign in").click()
        page.get_by_role("heading", name="Hello, alice").wait_for()
        assert page.get_by_role("cell", name="Vision models").is_visible()
        assert page.url.startswith(f"{shape.url}/")
        # Her sign-in gave her a certificate account on the sandbox: no key held.
        accounts = shape.manage("shell", stdin=ACCOUNTS).split("\n")
        assert "account alice alice certificate False" in accounts, accounts

        page.goto(f"{shape.url}/jobs/new/")
        page.get_by_role("heading", name="New job").wait_for()
        page.locator("#id_partition option", has_text="gpu").first.wait_for(state="attached")
        page.locator("#id_name").fill("shape-hello")
        page.locator("#id_gpus_per_node").fill("1")
        page.locator("#id_time_limit").fill("0:05:00")
        page.locator("#id_command").fill(
            'for i in 1 2 3 4 5 6; do echo "shape line $i as $(id -un)"; sleep 2; done'
        )
        page.get_by_role("button", name="Submit job").click()
        page.get_by_role("heading", name="shape-hello").wait_for()
        screenshot(page, "production-shape-job")

        # The log arrives live, over the page's WebSocket through Caddy.
        page.wait_for_function(
            "() => document.getElementById('log').textContent.includes('shape line')",
            timeout=QUEUE_WAIT * 1000,
        )
        page.wait_for_function(
            "() => document.getElementById('job-state').textContent.trim().toUpperCase()"
            " === 'COMPLETED'",
            timeout=QUEUE_WAIT * 1000,
        )
        # It ran as her own Unix account, logged in by certificate.
        assert "shape line 6 as alice" in page.locator("#log").inner_text()
        job_sockets = [s.url for s in sockets if "/ws/jobs/" in s.url]
        assert job_sockets and all(
            url.startswith(f"wss://localhost:{shape.port}/ws/jobs/") for url in job_sockets
        ), [s.url for s in sockets]
        assert any("shape line" in frame for frame in frames)
        screenshot(page, "production-shape-completed")
    except BaseException:
        print(shape.logs())  # the servers' own words, in the failure's report
        raise
    finally:
        context.close()
