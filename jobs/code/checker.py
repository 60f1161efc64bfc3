"""The code archive check, run in a process of its own, never in a web or poll process.

`clusters.agent.code_unpack` (the rules the cluster unpacks by) runs here as a
script under `CHECK_LIMITS`: Python's tarfile can spend minutes on one crafted
header with the GIL held (CVE-2024-6232), and a small xz archive can decompress to
gigabytes; in a child that costs the child alone, and it is killed at its limits.
An upload's check and a git fetch's (`jobs.code.snapshots.snapshot_store`) both come here.
"""

import json
import logging
import sys
from pathlib import Path

from django.conf import settings

from clusters.agent import code_unpack
from jobs.errors import JobError
from portal_lib.sandboxed import Limits, run_limited
from projects.models import Project
from projects.storage import code_quota_bytes

logger = logging.getLogger(__name__)

UNPACKER = Path(code_unpack.__file__)
# Time to decompress the largest upload (CODE_UPLOAD_MAX_BYTES) twice, with room to spare;
# memory for xz's largest preset's dictionary.
CHECK_LIMITS = Limits(cpu_seconds=120, memory_bytes=512 * 1024 * 1024, wall_seconds=150.0)


def unpacked_cap(project: Project) -> int:
    """The most a snapshot of the project may unpack to: its code storage quota, at most
    the site's cap (CODE_UNPACKED_MAX_BYTES)."""
    return min(settings.CODE_UNPACKED_MAX_BYTES, code_quota_bytes(project))


def _refused(message: str) -> JobError:
    return JobError(f"The code archive is refused: {message}.", errors={"archive": [message]})


def ratio_cap(packed: int) -> int | None:
    """How far an archive of `packed` bytes may unpack: CODE_UNPACKED_MAX_RATIO times its
    size, or CODE_UNPACKED_RATIO_FLOOR_BYTES at any ratio (None: no ratio rule). Code
    compresses three to ten times; a compression bomb (zeros behind xz) thousands."""
    limit = settings.CODE_UNPACKED_MAX_RATIO
    return max(settings.CODE_UNPACKED_RATIO_FLOOR_BYTES, limit * packed) if limit > 0 else None


def _ratio_words(packed: int, cap: int) -> str:
    return (
        f"unpacked, the files pass {cap} bytes: over {settings.CODE_UNPACKED_MAX_RATIO} times "
        f"the archive's {packed} bytes (any archive may unpack to "
        f"{settings.CODE_UNPACKED_RATIO_FLOOR_BYTES} bytes). That is a compression bomb, or "
        "data that belongs outside the code archive"
    )


def archive_check(path: Path | str, *, max_bytes: int, max_files: int) -> dict[str, int]:
    """The archive's file count and unpacked size ({files, bytes}); a JobError under the
    `archive` field naming the rule or the limit it broke. Within `max_bytes`, the archive
    may unpack as far as `ratio_cap` of its own size."""
    packed = Path(path).stat().st_size
    by_ratio = ratio_cap(packed)
    if by_ratio is not None and by_ratio < max_bytes:
        max_bytes = by_ratio  # the lower cap; its refusal is worded as the ratio below
    else:
        by_ratio = None
    request = {"archive": str(path), "max_bytes": max_bytes, "max_files": max_files}
    outcome = run_limited(
        # -I: no user site, no PYTHON* variables; -B: nothing written.
        [sys.executable, "-I", "-B", str(UNPACKER)],
        stdin=json.dumps({**request, "check": True}).encode(),
        limits=CHECK_LIMITS,
    )
    if outcome.past_limits:
        raise _refused(
            f"checking it passed the check's limits ({CHECK_LIMITS.words()}); "
            "leave data and generated files out of the archive"
        )
    lines = outcome.stdout.decode(errors="replace").strip().splitlines()
    try:
        reply = json.loads(lines[-1]) if lines else None
    except ValueError:
        reply = None
    if not isinstance(reply, dict):
        logger.error(
            "The code archive check of %s gave no reply (exit status %s): %s",
            path,
            outcome.returncode,
            outcome.stderr.decode(errors="replace")[-2000:],
        )
        raise _refused("it could not be checked (the failure is logged for the administrators)")
    if not reply.get("ok"):
        error = str(reply.get("error"))
        if by_ratio is not None and error == str(code_unpack.bytes_over(by_ratio)):
            error = _ratio_words(packed, by_ratio)
        raise _refused(error)
    return {"files": int(reply["files"]), "bytes": int(reply["bytes"])}
