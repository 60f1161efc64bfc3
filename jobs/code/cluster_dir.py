"""A directory on the cluster as a code snapshot: packed there, stored here like an upload.

A session's working directory becomes a run's code this way (sessions.to_run): `tar` runs
over the owner's own login, its gzip stream comes back under the upload cap, and
`snapshot_store` checks and keeps it by hash as it does an uploaded archive, so the run
and every restart of it get the directory as it was at submit, not as it is later.
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
# What JupyterLab and Python leave beside the code, and a git checkout's history: the
# Python client's archives leave them out too.
PACK_EXCLUDES = (".ipynb_checkpoints", "__pycache__", ".git")
# GNU tar's "some files changed as they were read" (a notebook saved meanwhile): packed.
_TAR_PACKED = (0, 1)


def pack_command(path: str) -> str:
    """The shell command that writes the directory's tree, gzipped, to stdout."""
    excludes = " ".join(f"--exclude={shlex.quote(name)}" for name in PACK_EXCLUDES)
    return f"tar -C {shlex.quote(path)} {excludes} -czf - ."


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
