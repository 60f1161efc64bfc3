"""The benchmarks' own database, `portal_bench` on the local PostgreSQL, made if missing."""

import os

os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings.test"
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/portal_bench")


def ensure_database() -> None:
    import psycopg

    url = os.environ["DATABASE_URL"]
    server, name = url.rsplit("/", 1)
    with psycopg.connect(server + "/postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{name}"')
