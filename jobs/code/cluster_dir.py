"""A directory on the cluster as a code snapshot: packed there, stored here like an upload.

A session's working directory becomes a run's code this way (sessions.to_run): `tar` runs
over the owner's own login, its gzip stream comes back under the upload cap, and
`snapshot_store` checks and keeps it by hash as it does an uploaded archive, so the run
and every restart of it get the directory as it was at submit, not as it is later.

Which files: those the Python client's archives take (portal_client.packing), chosen by
git on the cluster. In a git checkout, what git would track (`git ls-files -co
--exclude-standard`: committed, changed and untracked files, not ignored ones);
elsewhere, every file the directory's `.gitignore` files do not exclude (git's own
rules, through a throwaway repository). Both leave out PACK_EXCLUDES. GNU tar's
`--exclude-vcs-ignores` alone does not do: tar 1.34 keeps a `data/` line's folder (a
pattern ending in `/`) and reads no `!` line. It is the fallback where the cluster has
no git.
"""

import logging
import shlex

from django.conf import settings
from django.contrib.auth.models import User

from clusters.errors import ClusterError
from clusters.ssh import Connection, OutputCapExceeded
from jobs.code.snapshots import snapshot_store
from jobs.code.upload_rate import code_upload_admit
from jobs.errors import JobError
from jobs.models import CodeSnapshot
from projects.models import Project

logger = logging.getLogger(__name__)

PACK_TIMEOUT = 120.0
# What JupyterLab and Python leave beside the code (a checkout's `.git` is never listed):
# the Python client's archives leave them out too.
PACK_EXCLUDES = (".ipynb_checkpoints", "__pycache__", ".git")
# GNU tar's "some files changed as they were read" (a notebook saved meanwhile): packed.
_TAR_PACKED = (0, 1)
# Run by `sh` whatever the login shell, the directory as $1. A tracked file deleted and not
# yet committed is still listed by git: `--ignore-failed-read` leaves it out, as the client
# does. `ls -d` first, so that a missing directory's message names it.
_PACK_SCRIPT = """\
ls -d -- "$1" >/dev/null && cd -- "$1" || exit 2
if ! command -v git >/dev/null 2>&1; then
  exec tar --exclude-vcs-ignores {tar_excludes} -czf - .
fi
list=$(mktemp) || exit 2
bare=
trap 'rm -rf -- "$list" ${{bare:+"$bare"}}' EXIT
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z -co --exclude-standard {git_excludes} -- . >"$list"
else
  bare=$(mktemp -d) && git init -q --bare "$bare" &&
    git --git-dir="$bare" --work-tree=. ls-files -z -o --exclude-per-directory=.gitignore \\
      {git_excludes} >"$list"
fi && tar --null --no-recursion --ignore-failed-read -T "$list" -czf -
"""


def pack_command(path: str) -> str:
    """The shell command that writes the directory's files (what .gitignore keeps), gzipped,
    to stdout."""
    tar_excludes = " ".join(f"--exclude={shlex.quote(name)}" for name in PACK_EXCLUDES)
    git_excludes = " ".join(f"-x {shlex.quote(name)}" for name in PACK_EXCLUDES)
    script = _PACK_SCRIPT.format(tar_excludes=tar_excludes, git_excludes=git_excludes)
    return f"sh -c {shlex.quote(script)} pack {shlex.quote(path)}"


def directory_snapshot(
    *, connection: Connection, user: User, project: Project, path: str
) -> CodeSnapshot:
    """The directory at `path` (absolute, read by `connection`'s account) as a snapshot.

    Raises JobError saying what to change: a directory over the cap, one that cannot be
    read, or a cluster that cannot be reached.
    """
    cap = settings.CODE_UPLOAD_MAX_BYTES
    try:
        result = connection.run(pack_command(path), timeout=PACK_TIMEOUT, max_output=cap)
    except OutputCapExceeded as exc:
        message = (
            f"{path} packs to more than the code cap of {cap // (1024 * 1024)} MiB: move data "
            "and checkpoints out of it (or upload the code instead)."
        )
        raise JobError(message) from exc
    except ClusterError as exc:
        logger.warning("packing %s on the cluster failed: %s", path, exc)
        message = f"The cluster could not be reached to pack {path}; try again in a moment."
        raise JobError(message) from exc
    if result.exit_status not in _TAR_PACKED or not result.stdout:
        # tar names the cause first ("Cannot open: No such file"); its last line is a summary.
        said = result.stderr.decode("utf-8", "replace").strip().splitlines()[:1] or [""]
        message = f"{path} could not be packed on the cluster: {said[0][:300]}".rstrip(": ")
        raise JobError(message)
    code_upload_admit(user=user, project=project, size=len(result.stdout))
    snapshot, _ = snapshot_store(user=user, project=project, chunks=[result.stdout])
    return snapshot
