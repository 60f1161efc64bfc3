"""The system user `portal` that runs the portal's processes when root starts them.

Stdlib only: `bin/dev run` imports it before the virtualenv exists, and the production
shape (devtools/production_shape.py) makes its user here too. Root makes the user,
hands it the few files a local run writes (`run_files`), finds a Python that user can
run this checkout with (`python_for`), and starts each Procfile line through `setpriv`
(`procfile_as`): honcho stays root, so Ctrl-C still stops every process.

Where the virtualenv's interpreter is a link into /root (pyenv, uv's managed Pythons),
which other users cannot open, the user runs `.venv/debian-python`: a virtualenv on
Debian's python3 of the same minor version whose site-packages is a link to the
virtualenv's own. Being a virtualenv (not `python3 -S` with PYTHONPATH), it is also
what the processes' own children run (`sys.executable`, the poll's parser process),
with every package and `.pth` file the same.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from contextlib import suppress
from pathlib import Path

PORTAL_USER = "portal"
# As the Dockerfile makes `portal`: no home, no log-in shell.
USERADD = ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent"]
USERADD += ["--shell", "/usr/sbin/nologin"]
DEBIAN_PYTHON = Path("/usr/bin/python3")
# The virtualenv on Debian's python3 that shares the checkout's (inside .venv: ignored,
# root's, readable by all).
DEBIAN_VIEW = "debian-python"
# How the Procfile names the checkout's interpreter (relative to the checkout).
VENV_PYTHON = ".venv/bin/python"
# What the portal's processes import: a Python that cannot import these cannot run them.
PROBE = "import sys; assert sys.version_info[:2] == ({0}, {1}), sys.version; "
PROBE += "import django, daphne, celery, devtools.supervise; "
# ... and a child it starts as the poll starts its parser: `sys.executable`, PYTHONPATH reset.
PROBE += "import subprocess; subprocess.run([sys.executable, '-c', 'import django'], "
PROBE += "env={{'PYTHONPATH': '.'}}, check=True)"


class UserPythonMissing(Exception):
    """No Python that the user can run this checkout with; says why."""


def debian_view(venv: Path) -> Path:
    """`venv`/debian-python, made when missing: a virtualenv on Debian's python3 whose
    site-packages links to `venv`'s. Made aside and renamed into place, so that two
    callers at once leave one whole."""
    packages = site_packages(venv)
    view = venv / DEBIAN_VIEW
    linked = view / "lib" / packages.parent.name / "site-packages"
    if linked.is_symlink() and linked.resolve() == packages.resolve():
        return view
    aside = venv / f".{DEBIAN_VIEW}-{os.getpid()}"
    shutil.rmtree(aside, ignore_errors=True)
    made = subprocess.run(
        [str(DEBIAN_PYTHON), "-m", "venv", "--without-pip", str(aside)],
        capture_output=True,
        text=True,
        check=False,
    )
    own = aside / "lib" / packages.parent.name / "site-packages"
    if made.returncode != 0 or not own.is_dir():
        shutil.rmtree(aside, ignore_errors=True)
        said = (made.stderr.strip().splitlines() or [f"no {own.relative_to(aside)}"])[-1]
        raise UserPythonMissing(f"{DEBIAN_PYTHON} -m venv: {said}")
    own.rmdir()
    own.symlink_to(packages)
    shutil.rmtree(view, ignore_errors=True)  # a view of an older layout
    try:
        aside.rename(view)
    except OSError:  # another caller's came first
        shutil.rmtree(aside, ignore_errors=True)
    return view


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


def python_for(user: str, venv: Path, checkout: Path) -> Path:
    """The first interpreter with which `user` imports what the Procfile runs, from the
    checkout: the virtualenv's own, else its view on Debian's python3 (`debian_view`,
    made here if need be; the same minor version). UserPythonMissing says why neither."""
    packages = site_packages(venv)
    major, minor = packages.parent.name.removeprefix("python").split(".")
    reasons = []
    for make in (lambda: venv, lambda: debian_view(venv)):
        try:
            candidate = make() / "bin" / "python"
        except UserPythonMissing as exc:
            reasons.append(str(exc))
            continue
        try:
            probe = subprocess.run(
                [str(candidate), "-c", PROBE.format(major, minor)],
                cwd=checkout,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                capture_output=True,
                text=True,
                timeout=120,
                **_as_user(user),  # type: ignore[call-overload]
            )
        except OSError as exc:  # the interpreter or the checkout is out of its reach
            reasons.append(f"{candidate}: {exc.strerror}")
            continue
        if probe.returncode == 0:
            return candidate
        said = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        reasons.append(f"{candidate}: {said}")
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


def procfile_as(text: str, user: str, python: Path) -> str:
    """The Procfile `text` with each line run as `user` and the checkout's interpreter
    replaced by `python`'s command (its environment is the caller's to set)."""
    lines = []
    for line in text.splitlines():
        name, sep, command = line.partition(":")
        if not sep or not command.strip() or line.lstrip().startswith("#"):
            lines.append(line)
            continue
        command = command.strip().replace(VENV_PYTHON, shlex.quote(str(python)))
        # exec: honcho's shell becomes the process (dash would stay as root beside it).
        lines.append(f"{name}: exec {shlex.join(setpriv(user))} {command}")
    return "\n".join(lines) + "\n"


def user_env(env: Mapping[str, str], home: Path) -> dict[str, str]:
    """`env` for processes run as the user, with a HOME of its own (root's is closed to it)."""
    return {**env, "HOME": str(home)}
