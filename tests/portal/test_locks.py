"""The two locks compiled from pyproject.toml by `make lock`: exact, complete and in agreement.

requirements/prod.txt is what the image installs, requirements/dev.txt what .venv holds
(production's pins plus the tools). A range edited in pyproject.toml without `make lock`,
or a lock edited by hand, fails here.
"""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]
LOCKS = ("prod", "dev")
PIN = re.compile(r"(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)")
# What the image must not carry (issue 12: test tools in the production image).
DEV_ONLY = ("pytest", "playwright", "mypy", "ruff", "schemathesis", "honcho", "uv")


def lock_entries(lock: str) -> list[str]:
    """One entry per package, continuation lines (hashes) joined, comments dropped."""
    text = (ROOT / "requirements" / f"{lock}.txt").read_text().replace("\\\n", " ")
    entries = [line.split("#", 1)[0].strip() for line in text.splitlines()]
    return [entry for entry in entries if entry]


def pins(lock: str) -> dict[str, Version]:
    found: dict[str, Version] = {}
    for entry in lock_entries(lock):
        match = PIN.match(entry)
        assert match, entry
        name = canonicalize_name(match["name"])
        assert name not in found, f"{name} pinned twice in {lock}"
        found[name] = Version(match["version"])
    return found


def declared(extra: str | None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(name) for name in names]


@pytest.mark.parametrize("lock", LOCKS)
def test_every_lock_line_is_an_exact_pin(lock: str) -> None:
    entries = lock_entries(lock)
    assert entries
    loose = [entry for entry in entries if not PIN.fullmatch(entry.split(" --hash")[0].strip())]
    assert not loose


def test_the_production_lock_has_a_hash_for_every_package() -> None:
    unhashed = [entry for entry in lock_entries("prod") if "--hash=sha256:" not in entry]
    assert not unhashed


def test_the_locks_agree_on_every_shared_package() -> None:
    prod, dev = pins("prod"), pins("dev")
    assert set(prod) <= set(dev), set(prod) - set(dev)
    assert {name: (prod[name], dev[name]) for name in prod if prod[name] != dev[name]} == {}


@pytest.mark.parametrize(
    ("extra", "lock"), [(None, "prod"), (None, "dev"), ("dev", "dev")], ids=str
)
def test_every_declared_dependency_is_locked_within_its_range(extra: str | None, lock: str) -> None:
    locked = pins(lock)
    for requirement in declared(extra):
        name = canonicalize_name(requirement.name)
        assert name in locked, f"{requirement} is not in requirements/{lock}.txt: run make lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"{name}=={locked[name]} in requirements/{lock}.txt is outside {requirement}"
        )


def test_the_image_installs_production_only() -> None:
    assert not set(DEV_ONLY) & set(pins("prod"))
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "requirements/prod.txt" in dockerfile
    assert "requirements/dev.txt" not in dockerfile
    assert ".venv" in (ROOT / ".dockerignore").read_text().split()
