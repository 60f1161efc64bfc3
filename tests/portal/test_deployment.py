from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_compose_has_the_production_shape() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat"} <= set(services)
    for name in ("web", "worker", "beat"):
        env = services[name]["environment"]
        assert env["DJANGO_SETTINGS_MODULE"] == "portal.settings.production"
        assert env["DATABASE_URL"].startswith("postgres://")
        assert env["REDIS_URL"].startswith("redis://")
    assert "celery" in services["worker"]["command"] and "worker" in services["worker"]["command"]
    assert "beat" in services["beat"]["command"]


def test_migrations_match_the_models(db: None) -> None:
    from django.core.management import call_command

    call_command("makemigrations", "--check", "--dry-run", verbosity=0)
