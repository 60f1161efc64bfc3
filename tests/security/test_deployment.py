"""The deployment (issue #13, point 7): what a tenant's job or a used checkout could reach.

Before: `.state` was 755 and the database 644; Redis had no password and the cache
unpickled what it read (a job wrote a pickle and ran code in the web server);
production settings read the developer's `.env`; an image carried `.env`, keys and
the database.
"""

import fnmatch
import importlib.machinery
import importlib.util
import os
import pickle
import socket
import stat
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import redis
import yaml
from django.core.cache.backends.redis import RedisCache

from clusters.status import ClusterStatus, PartitionStatus
from devtools.servers import free_port, wait_until

ROOT = Path(__file__).resolve().parents[2]
GOOD = {
    "DJANGO_SETTINGS_MODULE": "portal.settings.production",
    "DJANGO_SECRET_KEY": "k" * 20 + "q7Zr" * 8,
    "FIELD_ENCRYPTION_KEYS": "cGNVZ3h2dGJoWk5yWHRsR0NxbW5mV2lLb2Z5Y1l6cDc=",
    "DATABASE_URL": "postgres://portal:s3cret-db@db:5432/portal",
    "REDIS_URL": "redis://:s3cret-redis@redis:6379/0",
}


def _production(env: dict[str, str], code: str = "") -> subprocess.CompletedProcess[str]:
    """Load the production settings in a fresh interpreter; `.env` reading is a failure."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "REDIS", "DATA"))}
    clean.pop("CELERY_BROKER_URL", None)
    script = (
        "import environ\n"
        "def refuse(*a, **k): raise AssertionError('production read a .env file')\n"
        "environ.Env.read_env = refuse\n"
        "import django; django.setup()\n"
        "from django.conf import settings as s\n" + code
    )
    return subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_production_loads_with_real_secrets_and_reads_no_dotenv() -> None:
    done = _production(
        GOOD,
        "print(s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS,"
        " getattr(s, 'SECURE_PROXY_SSL_HEADER', None),"
        " 'csp.middleware.CSPMiddleware' in s.MIDDLEWARE,"
        " s.CONTENT_SECURITY_POLICY['DIRECTIVES']['script-src'])",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["31536000", "True", "None", "True", "[\"'self'\"]"]


def test_the_proxy_header_is_trusted_only_behind_the_proxy() -> None:
    done = _production({**GOOD, "DJANGO_BEHIND_PROXY": "true"}, "print(s.SECURE_PROXY_SSL_HEADER)")
    assert done.returncode == 0, done.stderr
    assert "HTTP_X_FORWARDED_PROTO" in done.stdout


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"DJANGO_SECRET_KEY": ""}, "DJANGO_SECRET_KEY"),
        ({"DJANGO_SECRET_KEY": "test-secret-key-not-for-production"}, "DJANGO_SECRET_KEY"),
        ({"DATABASE_URL": "postgres://portal:portal@db:5432/portal"}, "DATABASE_URL"),
        ({"DATABASE_URL": "postgres://portal@db:5432/portal"}, "DATABASE_URL"),
        ({"REDIS_URL": "redis://redis:6379/0"}, "REDIS_URL"),
        ({"PORTAL_METRICS_TOKEN": "metrics"}, "PORTAL_METRICS_TOKEN"),
    ],
)
def test_production_refuses_to_start_with_a_default_or_no_password(
    change: dict[str, str], named: str
) -> None:
    done = _production({**GOOD, **change})
    assert done.returncode != 0
    assert named in done.stderr


def test_the_cache_never_unpickles_what_it_reads(tmp_path: Path, settings) -> None:
    # A job that reaches Redis writes a pickle under a key the portal reads.
    marker = tmp_path / "ran"
    cache = RedisCache(settings.REDIS_URL, {"OPTIONS": settings.CACHES_PRODUCTION_OPTIONS})
    key = cache.make_and_validate_key("clusters:status:1")

    class Exploit:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (marker.touch, ())  # type: ignore[return-value]

    client = redis.Redis.from_url(settings.REDIS_URL)
    client.set(key, pickle.dumps(Exploit()))
    try:
        with pytest.raises(ValueError):
            cache.get("clusters:status:1")
        assert not marker.exists()
    finally:
        client.delete(key)


def test_the_json_cache_keeps_what_the_portal_stores(settings) -> None:
    cache = RedisCache(settings.REDIS_URL, {"OPTIONS": settings.CACHES_PRODUCTION_OPTIONS})
    status = ClusterStatus(
        cluster="sandbox",
        read_at=None,
        partitions=[PartitionStatus("gpu", True, "up", "1-00:00:00", 2, 8, 3, 5)],
    )
    cache.set("deploy-test:status", status, 10)
    cache.set("deploy-test:history", [1.5, 2.5], 10)
    try:
        assert cache.get("deploy-test:status") == status
        assert cache.get("deploy-test:history") == [1.5, 2.5]
        assert cache.add("deploy-test:count", 1) and cache.incr("deploy-test:count") == 2
        with pytest.raises(TypeError):
            cache.set("deploy-test:object", object(), 10)  # not JSON: refused at set
    finally:
        cache.delete_many(["deploy-test:status", "deploy-test:history", "deploy-test:count"])


def _bin_dev(state: Path, port: int) -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("bin_dev", str(ROOT / "bin" / "dev"))
    spec = importlib.util.spec_from_loader("bin_dev", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    module.STATE = state  # type: ignore[attr-defined]
    module.LOCAL_REDIS_PORT = port  # type: ignore[attr-defined]
    return module


def test_bin_dev_starts_its_own_redis_with_a_password_in_a_private_state_dir(
    tmp_path: Path,
) -> None:
    state, port = tmp_path / ".state", free_port()
    state.mkdir(mode=0o755)
    (state / "db.sqlite3").write_bytes(b"")
    (state / "db.sqlite3").chmod(0o644)
    dev = _bin_dev(state, port)
    url, started = dev.ensure_redis({}, db=0)
    try:
        assert stat.S_IMODE(state.stat().st_mode) == 0o700
        assert stat.S_IMODE((state / "db.sqlite3").stat().st_mode) == 0o600
        assert stat.S_IMODE((state / "redis.password").stat().st_mode) == 0o600
        password = (state / "redis.password").read_text().strip()
        assert started and url == f"redis://:{password}@127.0.0.1:{port}/0"
        with socket.create_connection(("127.0.0.1", port), 5) as anonymous:
            anonymous.sendall(b"PING\r\n")
            assert anonymous.recv(64).startswith(b"-NOAUTH")
        assert redis.Redis.from_url(url).ping()
        # The password is on no command line (another user's `ps` sees those).
        pid = (state / "redis.pid").read_text().strip()
        assert password not in Path(f"/proc/{pid}/cmdline").read_text()
        assert dev.find_redis({}, db=0) == url  # reused, not started twice
        assert dev.ensure_redis({}, db=0) == (url, False)
    finally:
        redis.Redis.from_url(url).shutdown(nosave=True)
        wait_until(lambda: not dev._reachable(url, port), 10, "the test's redis to stop")


def test_a_second_checkout_starts_its_redis_on_another_port_when_the_first_holds_it(
    tmp_path: Path,
) -> None:
    port = free_port()
    first = _bin_dev(tmp_path / "first", port)
    second = _bin_dev(tmp_path / "second", port)
    for dev in (first, second):
        dev.STATE.mkdir(mode=0o700)
    url1, _ = first.ensure_redis({}, db=0)
    try:
        url2, started = second.ensure_redis({}, db=0)
        try:
            moved = int((second.STATE / "redis.port").read_text())
            assert started and moved != port and url2.endswith(f"@127.0.0.1:{moved}/0")
            assert redis.Redis.from_url(url1).ping() and redis.Redis.from_url(url2).ping()
            assert second.ensure_redis({}, db=0) == (url2, False)  # kept, found again
        finally:
            redis.Redis.from_url(url2).shutdown(nosave=True)
    finally:
        redis.Redis.from_url(url1).shutdown(nosave=True)
        wait_until(lambda: not first._reachable(url1, port), 10, "the test's redis to stop")


def test_compose_has_no_default_passwords_and_redis_requires_one() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    compose = yaml.safe_load(text)
    services = compose["services"]
    assert "${POSTGRES_PASSWORD:?" in services["postgres"]["environment"]["POSTGRES_PASSWORD"]
    assert "requirepass" in " ".join(services["redis"]["command"])
    portal_env = services["web"]["environment"]
    assert portal_env["REDIS_URL"].startswith("redis://:${REDIS_PASSWORD:?")
    assert ":${POSTGRES_PASSWORD:?" in portal_env["DATABASE_URL"]


def test_compose_publishes_the_portal_only_through_its_tls_proxy() -> None:
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    # web is reached through the proxy alone, so it alone trusts X-Forwarded-Proto.
    assert "ports" not in services["web"]
    assert services["web"]["environment"]["DJANGO_BEHIND_PROXY"] == "true"
    for name in ("worker", "beat", "migrate"):
        assert services[name]["environment"]["DJANGO_BEHIND_PROXY"] == "false", name
    proxy = services["proxy"]
    assert "443:443" in proxy["ports"]
    assert "./deploy/caddy/Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    caddyfile = (ROOT / "deploy" / "caddy" / "Caddyfile").read_text()
    assert "reverse_proxy web:8000" in caddyfile
    assert "trusted_proxies" not in caddyfile  # a client's X-Forwarded-* is never passed on
    # Prometheus scrapes web by its service name over plain http: allowed, not redirected.
    assert "web" in services["web"]["environment"]["DJANGO_ALLOWED_HOSTS"].split(",")
    assert all(port.startswith("127.0.0.1:") for port in services["grafana"]["ports"])


def test_the_metrics_scrape_is_not_redirected_to_https() -> None:
    done = _production(
        {**GOOD, "DJANGO_BEHIND_PROXY": "true"},
        "import re; print([bool(re.search(p, 'metrics')) for p in s.SECURE_REDIRECT_EXEMPT])",
    )
    assert done.returncode == 0, done.stderr
    assert "[True]" in done.stdout


def test_the_image_runs_as_its_own_user_and_leaves_secrets_out() -> None:
    lines = [line.split() for line in (ROOT / "Dockerfile").read_text().splitlines() if line]
    users = [words[1] for words in lines if words[0] == "USER"]
    assert users and users[-1] not in ("root", "0")
    last_user = max(i for i, words in enumerate(lines) if words[0] == "USER")
    assert not [words for words in lines[last_user:] if words[0] == "RUN"]
    patterns = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in (
        ".env",
        ".env.production",
        ".sandbox",
        ".state",
        "db.sqlite3",
        "portal.sqlite3",
        "keys/cluster.pem",
        "id_ed25519",
        "deploy/site.key",
    ):
        first = path.split("/")[0]
        assert any(
            fnmatch.fnmatch(path, p)
            or fnmatch.fnmatch(first, p)
            or fnmatch.fnmatch(Path(path).name, p)
            for p in patterns
        ), path


@pytest.mark.parametrize("with_redis", [False, True])
def test_make_run_serves_the_web_on_the_port_it_names(tmp_path: Path, with_redis: bool) -> None:
    """honcho's $PORT is its base plus 100 per line above the web's: Redis first put the
    portal on 8100 while `make run` said 8000."""
    dev = _bin_dev(tmp_path / ".state", 6390)
    procfile = dev.run_procfile(8000, with_redis=with_redis)
    lines = dict(line.split(": ", 1) for line in procfile.splitlines() if line.strip())
    assert "-p 8000 " in lines["web"] and "$PORT" not in procfile
    assert ("redis" in lines) is with_redis
