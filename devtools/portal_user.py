"""The system user `portal` that runs the portal's processes when root starts them.

Stdlib only: `bin/dev run` imports it before the virtualenv exists, and the production
shape (devtools/production_shape.py) makes its user here too. Root makes the user,
hands it the few files a local run writes (`run_files`), finds a Python that user can
run this checkout with (`python_for`), and starts each Procfile line through `setpriv`
(`procfile_as`): honcho stays root, so Ctrl-C still stops every process.
"""

from __future__ import annotations

import os
import pwd
import shlex
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path

PORTAL_USER = "portal"
# As the Dockerfile makes `portal`: no home, no log-in shell.
USERADD = ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent"]
USERADD += ["--shell", "/usr/sbin/nologin"]
# Where a development interpreter lives under /root (pyenv, uv's managed Pythons),
# other users cannot open it: Debian's python3 of the same version runs the same
# locked packages, without its own site packages (-S).
DEBIAN_PYTHON = Path("/usr/bin/python3")
# How the Procfile names the checkout's interpreter (relative to the checkout).
VENV_PYTHON = ".venv/bin/python"
# What the portal's processes import: a Python that cannot import these cannot run them.
PROBE = "import sys; assert sys.version_info[:2] == ({0}, {1}), sys.version; "
PROBE += "import django, daphne, celery, devtools.supervise"


class UserPythonMissing(Exception):
    """No Python that the user can run this checkout with; says why."""


@dataclass(frozen=True)
class UserPython:
    """How `user` runs the checkout's Python: the command and what its environment adds."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def ensure_system_user(name: str = PORTAL_USER) -> pwd.struct_passwd:
    """The system user `name`, made as the Dockerfile makes it when missing."""
    with suppress(KeyError):
        return pwd.getpwnam(name)
    subprocess.run([*USERADD, name], check=True, capture_output=True)
    return pwd.getpwnam(name)


def site_packages(venv: Path) -> Path:
    """The virtualenv's one site-packages folder (lib/pythonX.Y/site-packages)."""
    found = sorted(venv.glob("lib/python3.*/site-packages"))
    if len(found) != 1:
        raise UserPythonMissing(f"{venv} has {len(found)} site-packages folders, not one")
    return found[0]


def _as_user(user: str) -> dict[str, object]:
    return {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []}


def python_for(user: str, venv: Path, checkout: Path) -> UserPython:
    """The first interpreter with which `user` imports what the Procfile runs, from the
    checkout: the virtualenv's own, else Debian's python3 (same minor version) with -S
    and PYTHONPATH at the virtualenv's packages. UserPythonMissing says why neither."""
    packages = site_packages(venv)
    major, minor = packages.parent.name.removeprefix("python").split(".")
    candidates = [
        UserPython([str(venv / "bin" / "python")]),
        UserPython([str(DEBIAN_PYTHON), "-S"], {"PYTHONPATH": str(packages)}),
    ]
    reasons = []
    for candidate in candidates:
        try:
            probe = subprocess.run(
                [*candidate.argv, "-c", PROBE.format(major, minor)],
                cwd=checkout,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", **candidate.env},
                capture_output=True,
                text=True,
                timeout=120,
                **_as_user(user),  # type: ignore[call-overload]
            )
        except OSError as exc:  # the interpreter or the checkout is out of its reach
            reasons.append(f"{candidate.argv[0]}: {exc.strerror}")
            continue
        if probe.returncode == 0:
            return candidate
        said = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        reasons.append(f"{candidate.argv[0]}: {said}")
    raise UserPythonMissing(f"user {user} cannot run {checkout}'s Python ({'; '.join(reasons)})")


def run_files(checkout: Path) -> tuple[list[Path], list[Path]]:
    """What a local run (portal.settings.local) writes, which its user must own: files and
    folders owned as they are, and folders owned with all they hold. Nothing else of the
    checkout: the code, .venv and Redis's password file stay root's."""
    state = checkout / ".state"
    owned = [state, checkout / ".env", state / "redis.conf"]
    owned += sorted(state.glob("db.sqlite3*")) + sorted(state.glob("celerybeat-schedule*"))
    trees = [state / "outbox", state / "code", checkout / "staticfiles"]
    return owned, trees


def grant(user: str, owned: list[Path], trees: list[Path]) -> None:
    """Give `user` the paths (made when missing: a folder of a tree, 0700), its own
    group with them; a tree with everything in it."""
    account = pwd.getpwnam(user)
    ids = (account.pw_uid, account.pw_gid)
    for tree in trees:
        tree.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder, folders, files in os.walk(tree):
            for name in [folder, *(os.path.join(folder, n) for n in folders + files)]:
                os.chown(name, *ids, follow_symlinks=False)
    for path in owned:
        if path.exists():
            os.chown(path, *ids)


def setpriv(user: str) -> list[str]:
    """The command prefix that runs what follows as `user`, its own group and no other
    (util-linux's setpriv execs it: same process, so signals reach it)."""
    group = pwd.getpwnam(user).pw_gid
    return ["setpriv", f"--reuid={user}", f"--regid={group}", "--clear-groups", "--"]


def procfile_as(text: str, user: str, python: UserPython) -> str:
    """The Procfile `text` with each line run as `user` and the checkout's interpreter
    replaced by `python`'s command (its environment is the caller's to set)."""
    lines = []
    for line in text.splitlines():
        name, sep, command = line.partition(":")
        if not sep or not command.strip() or line.lstrip().startswith("#"):
            lines.append(line)
            continue
        command = command.strip().replace(VENV_PYTHON, shlex.join(python.argv))
        # exec: honcho's shell becomes the process (dash would stay as root beside it).
        lines.append(f"{name}: exec {shlex.join(setpriv(user))} {command}")
    return "\n".join(lines) + "\n"


def user_env(env: Mapping[str, str], python: UserPython, home: Path) -> dict[str, str]:
    """`env` for processes run as the user: the interpreter's additions, and a HOME of its
    own (root's is closed to it)."""
    return {**env, **python.env, "HOME": str(home)}
