"""The jobs' Python: a virtualenv with PyTorch (CPU build) and the frameworks researchers
train with (Hugging Face Transformers and Accelerate, Lightning, Keras 3 on torch, Rich,
TensorBoard) and JupyterLab for interactive sessions, pinned, so the suite runs their code
the way researchers do.

Made once by `up` with Debian's /usr/bin/python3 (root's python may live under
/root, which the users cannot reach); a marker file makes later `up`s skip pip.
A failed install never fails `up`: the cluster is useful without torch, and
`status` says why it is missing. pip runs with root's own configuration, so it
takes the wheels that lie on this machine; should it start to download torch
(or CUDA libraries) from the network instead, it is stopped.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pwd
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

from .config import USERS, Paths
from .system import SandboxError, run

logger = logging.getLogger(__name__)

TORCH_VERSION = "2.13.0"
# numpy too: torch imports without it but warns, and torch.distributed's object
# collectives (all_gather_object, broadcast_object_list) need it. The frameworks: their
# progress bars, loggers and files are what the portal must read unchanged (tests/e2e/
# test_frameworks_matrix.py). torch stays pinned above, so none of them pulls a CUDA build.
FRAMEWORKS = (
    "transformers==5.25.0",
    "accelerate==1.16.0",
    "lightning==2.6.6",
    "keras==3.15.1",
    "rich==15.0.0",
    "tensorboard==2.21.0",
    # Interactive sessions (jobs.interactive) start `jupyter lab` from the jobs' PATH.
    "jupyterlab==4.6.6",
)
REQUIREMENTS = (f"torch=={TORCH_VERSION}", "numpy==2.4.6", *FRAMEWORKS)
# Written last; a different text (older requirements) means "install again".
READY_TEXT = " ".join(REQUIREMENTS)
SYSTEM_PYTHON = "/usr/bin/python3"
INSTALL_TIMEOUT = 900.0
# A CPU torch from the local wheel is ~190 MB; these downloads mean gigabytes.
_HUGE_DOWNLOAD = re.compile(r"^\s*Downloading\s+(torch|triton|nvidia[-_])", re.IGNORECASE)
# pip lines worth showing as progress.
_PROGRESS = re.compile(r"^(Processing|Collecting|Downloading|Installing|Successfully)\b")


def _ready_marker(paths: Paths) -> Path:
    return paths.pyenv / ".portal-ready"


def _failed_marker(paths: Paths) -> Path:
    # Outside the venv, which is removed before each new attempt.
    return paths.root / "pyenv.failed"


def _lock_file(paths: Paths) -> Path:
    return paths.root / "pyenv.lock"


def ready(paths: Paths) -> bool:
    marker = _ready_marker(paths)
    try:
        return marker.read_text().strip() == READY_TEXT and (paths.pyenv_bin / "python").exists()
    except OSError:
        return False


def describe(paths: Paths) -> str:
    """'torch 2.13.0' or 'torch missing: <reason>', for `status`."""
    if ready(paths):
        return f"torch {TORCH_VERSION}"
    try:
        reason = _failed_marker(paths).read_text().strip()
    except OSError:
        reason = "not installed yet (run `manage.py sandbox up` as root)"
    return f"torch missing: {reason}"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One installer at a time, across processes (two `up`s at once)."""
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def _pip_install(python: Path, requirements: tuple[str, ...]) -> None:
    """Run pip, logging its progress; stop it if it fetches torch from the network."""
    cmd = [str(python), "-m", "pip", "install", "--no-input", "--no-cache-dir"]
    cmd += ["--progress-bar", "off", *requirements]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(INSTALL_TIMEOUT, proc.kill)
    timer.start()
    tail: list[str] = []
    refused = ""
    try:
        for raw in proc.stdout or ():
            line = raw.rstrip()
            tail = [*tail[-9:], line]
            if _PROGRESS.match(line.strip()):
                logger.info("job python: pip: %s", line.strip())
            if _HUGE_DOWNLOAD.match(line):
                refused = line.strip()
                proc.kill()
                break
        proc.wait()
    finally:
        timer.cancel()
        if proc.stdout is not None:
            proc.stdout.close()
    if refused:
        raise SandboxError(
            f"pip would download from the network instead of using a local wheel "
            f"({refused!r}); stopped it. Check pip's find-links (`pip config debug`)."
        )
    if proc.returncode != 0:
        last = next((ln for ln in reversed(tail) if ln.strip()), "")
        killed = " (timed out)" if proc.returncode < 0 else ""
        raise SandboxError(f"pip exited {proc.returncode}{killed}: {last.strip()}")


def _install(paths: Paths) -> None:
    if not Path(SYSTEM_PYTHON).exists():
        raise SandboxError(f"{SYSTEM_PYTHON} not found (apt-get install python3 python3-venv)")
    shutil.rmtree(paths.pyenv, ignore_errors=True)  # whatever an interrupted attempt left
    # World-readable files whatever root's umask, so every sandbox user can import torch.
    with _umask(0o022):
        run([SYSTEM_PYTHON, "-m", "venv", str(paths.pyenv)], timeout=180)
        _pip_install(paths.pyenv_bin / "python", REQUIREMENTS)
    imports = "import numpy, transformers, lightning, keras, tensorboard, jupyterlab, torch"
    # Keras 3 needs a backend named; this venv has torch's only.
    python = ["env", "KERAS_BACKEND=torch", str(paths.pyenv_bin / "python")]
    check = [*python, "-c", f"{imports}; print(torch.__version__)"]
    # As a sandbox user (once `up` made them): the venv must be readable by the jobs.
    with contextlib.suppress(KeyError):
        check = ["runuser", "-u", pwd.getpwnam(USERS[0]).pw_name, "--", *check]
    version = run(check, timeout=120).strip()
    if not version.startswith(TORCH_VERSION):
        raise SandboxError(f"the venv imports torch {version!r}, not {TORCH_VERSION}")


def ensure_pyenv(paths: Paths) -> str:
    """Create the job python once; never raises. Returns `describe(paths)`."""
    if ready(paths):
        return describe(paths)
    paths.root.mkdir(parents=True, exist_ok=True)
    with _locked(_lock_file(paths)):
        if ready(paths):  # another `up` made it while we waited
            return describe(paths)
        logger.info(
            "job python: installing torch %s into %s (first `up` only; a minute or two)",
            TORCH_VERSION,
            paths.pyenv,
        )
        try:
            _install(paths)
        except (SandboxError, OSError, subprocess.SubprocessError) as exc:
            reason = " ".join(str(exc).split())[:500]
            _failed_marker(paths).write_text(reason + "\n")
            logger.warning("job python: torch missing: %s", reason)
            return describe(paths)
        _failed_marker(paths).unlink(missing_ok=True)
        _ready_marker(paths).write_text(READY_TEXT + "\n")
        logger.info("job python: torch %s ready in %s", TORCH_VERSION, paths.pyenv)
    return describe(paths)
