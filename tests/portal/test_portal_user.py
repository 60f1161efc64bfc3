"""`make run` as root runs the web server, the worker and beat as the system user
`portal` (devtools/portal_user.py, issue 34 point 5).

The real Procfile, through the same rewriting `bin/dev run` does, run by honcho as
root: each line through `setpriv`, on the Python that user can reach. The checkout's
`.state` and `.env` are stood in for by a folder of the test's own, handed to that user
as `bin/dev run` hands the real ones; the servers use this worker's test database.
"""

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devtools import portal_user
from devtools.portal_user import PORTAL_USER, python_for, run_files
from devtools.servers import (
    ROOT,
    TAG_VARIABLE,
    Server,
    answers,
    free_port,
    kill_processes,
    leftover_processes,
    purge_queue,
    wait_until,
)
from tests.fixtures.servers import live_env
from tests.helpers import worker_tag

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="needs root and util-linux's setpriv (as `make run`'s own drop to `portal` does)",
)

TAG = f"{worker_tag()}-portal-user"
VENV = ROOT / ".venv"


@pytest.fixture
def stand_in() -> Iterator[Path]:
    """A folder laid out as a checkout's local-run files (`.state`, `.env`), 0711 above
    them as a checkout's folder is to others; removed after."""
    portal_user.ensure_system_user()
    base = Path(tempfile.mkdtemp(prefix="portal-user-"))
    try:
        base.chmod(0o711)
        state = base / ".state"
        state.mkdir(mode=0o700)
        for name in (".env", ".state/redis.password", ".state/db.sqlite3"):
            (base / name).touch(mode=0o600)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _owner(path: Path) -> str:
    import pwd

    return pwd.getpwuid(path.stat().st_uid).pw_name


def test_the_user_owns_what_a_local_run_writes_and_nothing_more(stand_in: Path) -> None:
    portal_user.grant(PORTAL_USER, *run_files(stand_in))
    owners = {
        str(path.relative_to(stand_in)): _owner(path)
        for path in sorted(stand_in.rglob("*"))
        if path.relative_to(stand_in).parts[0] != "staticfiles"
    }
    assert owners == {
        ".env": PORTAL_USER,
        ".state": PORTAL_USER,
        ".state/code": PORTAL_USER,
        ".state/db.sqlite3": PORTAL_USER,
        ".state/outbox": PORTAL_USER,
        ".state/redis.password": "root",  # bin/dev's alone: the processes get the URL
    }
    assert _owner(stand_in) == "root"


def test_a_checkout_the_user_cannot_open_is_named(tmp_path: Path) -> None:
    portal_user.ensure_system_user()
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    with pytest.raises(portal_user.UserPythonMissing, match=f"user {PORTAL_USER} cannot run"):
        python_for(PORTAL_USER, VENV, closed)


def _processes() -> dict[int, tuple[int, str]]:
    """This test's live processes: pid -> (uid, command line)."""
    return {
        pid: (os.stat(f"/proc/{pid}").st_uid, command)
        for pid, command in leftover_processes(TAG)
        if os.path.exists(f"/proc/{pid}")
    }


def _started(what: str) -> bool:
    """A process running `what` itself (not its supervisor) is up."""
    return any(
        what in command and "devtools.supervise" not in command
        for _, command in _processes().values()
    )


@pytest.fixture
def local_run(stand_in: Path) -> Path:
    """The stand-in checkout for a test that starts make run's servers (slow: not in
    `make check`, tests/harness.py's SLOW_FIXTURES)."""
    return stand_in


@pytest.mark.django_db(transaction=True)
def test_make_runs_procfile_runs_as_the_portal_user_and_answers(local_run: Path) -> None:
    stand_in = local_run
    try:
        python = python_for(PORTAL_USER, VENV, ROOT)
    except portal_user.UserPythonMissing as exc:  # make run then runs as root, and says so
        pytest.skip(f"this machine does not allow it: {exc}")
    state = stand_in / ".state"
    portal_user.grant(PORTAL_USER, *run_files(stand_in))
    port = free_port()
    # As bin/dev's run_procfile writes the port in; the stand-in's .state for the real one.
    text = (ROOT / "Procfile").read_text().replace("$PORT", str(port))
    procfile = stand_in / "Procfile"
    procfile.write_text(
        portal_user.procfile_as(text.replace(".state/", f"{state}/"), PORTAL_USER, python)
    )
    env = {
        **live_env(),
        TAG_VARIABLE: TAG,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        "OUTBOX_DIR": str(state / "outbox"),
        "CODE_SNAPSHOT_DIR": str(state / "code"),
    }
    env = portal_user.user_env(env, state)
    command = [str(VENV / "bin" / "honcho"), "-f", str(procfile), "-d", str(ROOT), "start"]
    manager = Server("honcho", [], env, stand_in, lambda: answers(port), argv=command)
    try:
        manager.start(timeout=180)
        wait_until(
            lambda: _started("-A portal worker") and _started("-A portal beat"),
            180,
            "the worker and beat",
        )
        wait_until(lambda: list(state.glob("celerybeat-schedule*")), 120, "beat's schedule")
        page = httpx.get(f"http://127.0.0.1:{port}/login/", timeout=30)
        assert page.status_code == 200
        assert "<h1>Log in</h1>" in page.text and 'name="password"' in page.text

        running = _processes()
        portal_uid = portal_user.ensure_system_user().pw_uid
        # honcho (and its helper per line) alone stays root; the Procfile's processes
        # (supervisors, daphne, the worker and its pool, beat) are all the user's.
        honcho = {pid: uid for pid, (uid, line) in running.items() if "bin/honcho" in line}
        assert set(honcho.values()) == {0}
        processes = {pid: entry for pid, entry in running.items() if pid not in honcho}
        for name in ("-m daphne", "-A portal worker", "-A portal beat"):
            assert _started(name), (name, processes)
        assert {uid for uid, _ in processes.values()} == {portal_uid}, processes
        # Beat wrote its schedule into the folder it was handed.
        assert {_owner(path) for path in state.glob("celerybeat-schedule*")} == {PORTAL_USER}
    except BaseException:
        print(manager.log_tail(80))
        raise
    finally:
        manager.stop()
        left = leftover_processes(TAG)
        kill_processes([pid for pid, _ in left])
        purge_queue(env)
    assert left == [], f"make run's processes outlived honcho: {left}"
