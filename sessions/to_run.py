"""From a session to a run: a training job whose code is a frozen copy of the directory the
session's JupyterLab started in, with the session's environment (issue 39, point 4).

The directory is the one the batch script recorded (`jobs.rundir.WORKDIR_FILE`, the
server's root: `jobs.interactive`), read over the owner's login. It is packed there and
stored as a code snapshot at submit (`jobs.code.cluster_dir`), so the run sees the
notebooks' directory as it was then. A home directory or the run directory itself is
refused: their snapshot would carry keys, settings or the portal's own files.
"""

import dataclasses
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.contrib.auth.models import User

from clusters.errors import ClusterError
from clusters.models import Cluster
from clusters.selectors import account_endpoint
from clusters.ssh import Connection, pool
from jobs.code.cluster_dir import directory_snapshot
from jobs.enums import Template
from jobs.errors import JobError
from jobs.models import Attempt, CodeSnapshot, Job
from jobs.rundir import WORKDIR_FILE
from jobs.services import job_annotate, job_submit
from jobs.specs import JobSpec, spec_from_job
from projects.models import Project

READ_TIMEOUT = 10.0
# What the run's command box suggests: the session leaves the command to its owner.
COMMAND_HINT = "python train.py"
T = TypeVar("T")
_CD = re.compile(r"^\s*(cd|pushd)(\s|$)")


@dataclass(frozen=True)
class SessionRoot:
    """Where the session's JupyterLab started (its notebooks' root), and the attempt's login."""

    path: str
    attempt: Attempt


def _latest_started(session: Job) -> Attempt:
    attempt = (
        Attempt.objects.select_related("account__cluster")
        .filter(job_id=session.pk, started_at__isnull=False, account__isnull=False)
        .exclude(run_dir="")
        .order_by("-number")
        .first()
    )
    if attempt is None:
        raise JobError(
            f"Session #{session.pk} has not started yet: its working directory is known once "
            "JupyterLab runs."
        )
    return attempt


def root_problem(*, path: str, run_dir: str, session_id: int) -> str | None:
    """Why the directory may not become a run's code; None when it may."""
    if not path:
        return (
            f"Session #{session_id} ran in your home directory: a snapshot of it would carry "
            "your keys and settings. Start the session in the project's directory (a `cd` in "
            "its set-up), or upload the code instead."
        )
    if not path.startswith("/") or "\x00" in path:
        return f"Session #{session_id}'s working directory ({path!r}) is not an absolute path."
    root, run = path.rstrip("/") or "/", run_dir.rstrip("/")
    if run == root or run.startswith(f"{root.rstrip('/')}/"):
        return (
            f"Session #{session_id}'s working directory {root} holds its run directory, the "
            "portal's files (log, session token): start the session in the project's "
            "directory (a `cd` in its set-up), or upload the code instead."
        )
    return None


def _read_root(connection: Connection, attempt: Attempt) -> str:
    path = f"{attempt.run_dir.rstrip('/')}/{WORKDIR_FILE}"
    result = connection.run(f"cat -- {shlex.quote(path)}", timeout=READ_TIMEOUT, max_output=8192)
    if result.exit_status != 0:
        raise JobError(
            f"Session #{attempt.job_id} has not recorded its working directory yet; try again "
            "once JupyterLab runs."
        )
    return result.stdout.split(b"\n", 1)[0].decode("utf-8", "replace").strip()


def _with_root(session: Job, use: Callable[[SessionRoot, Connection], T]) -> T:
    """`use` the session's root, over the login of the attempt that recorded it."""
    attempt = _latest_started(session)
    account = attempt.account
    if account is None:  # filtered out: for the type checker
        raise JobError(f"Session #{session.pk} has no cluster login.")
    try:
        with pool.session(account_endpoint(account=account)) as connection:
            path = _read_root(connection, attempt)
            problem = root_problem(path=path, run_dir=attempt.run_dir, session_id=session.pk)
            if problem:
                raise JobError(problem)  # no field: the form shows it on top
            return use(SessionRoot(path=path, attempt=attempt), connection)
    except ClusterError as exc:
        raise JobError(
            f"Cluster {session.cluster.name} cannot be reached to read session #{session.pk}'s "
            "working directory; try again in a moment."
        ) from exc


def session_root(*, session: Job) -> SessionRoot:
    """The session's working directory, read now; JobError saying why it cannot be a run's."""
    return _with_root(session, lambda root, _: root)


def run_setup(setup: str) -> str:
    """The session's set-up for the run: its `cd` lines commented out, since the run starts in
    its snapshot of the directory they led to."""
    return "\n".join(
        f"# {line.strip()}  # the run starts in its snapshot of the session's directory"
        if _CD.match(line)
        else line
        for line in setup.splitlines()
    )


def run_spec(session: Job) -> JobSpec:
    """The session's spec as a command job: same resources and environment, no command yet."""
    return dataclasses.replace(
        spec_from_job(session),
        name=f"{session.name[:124]} run",
        template=Template.COMMAND,
        command="",
        setup=run_setup(session.setup),
        code=None,
        code_commit="",
        code_branch="",
        code_diff="",
        code_diff_truncated=False,
        code_git_url="",
        code_git_ref="",
    )


def run_note(session: Job, root: str) -> str:
    return f"From session #{session.pk}: a snapshot of its working directory {root}."


def session_run_submit(
    *, user: User, session: Job, project: Project, cluster: Cluster, spec: JobSpec
) -> Job:
    """Submit `spec` with a snapshot of the session's working directory, taken now, as its
    code; the run's note names the session. The caller checked that `user` owns it."""
    if session.user_id != user.pk or session.template != Template.JUPYTER:
        raise JobError(f"Job #{session.pk} is not a session of yours.")
    if not spec.command.strip():
        # Before packing: the directory is not read for a run that cannot start.
        raise JobError(
            "Give the run's command, e.g. `python train.py`.",
            errors={"command": ["Give the run's command, e.g. `python train.py`."]},
        )

    def pack(root: SessionRoot, connection: Connection) -> tuple[str, CodeSnapshot]:
        snapshot = directory_snapshot(
            connection=connection, user=user, project=project, path=root.path
        )
        return root.path, snapshot

    path, snapshot = _with_root(session, pack)
    code = dataclasses.replace(spec, code=snapshot, code_git_url="", code_git_ref="")
    job = job_submit(user=user, project=project, cluster=cluster, spec=code)
    return job_annotate(job=job, user=user, note=run_note(session, path))
