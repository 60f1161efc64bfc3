"""Faulty GPUs of the sandbox's stand-in nvidia-smi (stdlib only).

A JSON file beside the stand-in (``nvidia-smi-faults.json``, written by tests as root,
readable by every tenant) makes a node's GPUs faulty: their uncorrected and corrected
volatile ECC counts grow by one every ``uncorrected_every_s`` / ``corrected_every_s``
seconds since ``since`` (a Unix time), as a failing memory's do while the driver stays
loaded, and ``retired_pages_pending`` says what ``retired_pages.pending`` prints::

    {"n2": {"uncorrected_every_s": 1.0, "since": 1765000000.0, "gpus": [0, 1],
            "under": "/scratch/portal/runs/t1-gw0"}}

Tests on several workers each write their own file into ``nvidia-smi-faults.json.d/``
(``faults_written``). With ``under``, only a sampler whose ``PORTAL_RUN_DIR`` is under
that directory sees the faults: one test's faulty node fails no other test's jobs on the
shared sandbox. Without an entry a GPU reads 0 errors and ``[N/A]`` for pending pages,
as an H200 does (Ampere and later GPUs remap rows instead of retiring pages).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

FAULTS_FILE = "nvidia-smi-faults.json"
# Tests of the stand-in run it from the source tree: they name their own file.
FAULTS_ENV = "PORTAL_FAKE_NVSMI_FAULTS"


@dataclass(frozen=True)
class Faults:
    uncorrected_every_s: float = 0.0  # 0: no uncorrected errors
    corrected_every_s: float = 0.0
    since: float = 0.0
    retired_pages_pending: str = "[N/A]"
    gpus: tuple[int, ...] | None = None  # None: every GPU of the node

    def _count(self, index: int, every_s: float, now: float) -> int:
        if every_s <= 0 or now < self.since or (self.gpus is not None and index not in self.gpus):
            return 0
        return math.floor((now - self.since) / every_s)

    def uncorrected(self, index: int, now: float) -> int:
        return self._count(index, self.uncorrected_every_s, now)

    def corrected(self, index: int, now: float) -> int:
        return self._count(index, self.corrected_every_s, now)

    def pending(self, index: int) -> str:
        if self.gpus is not None and index not in self.gpus:
            return Faults.retired_pages_pending
        return self.retired_pages_pending


HEALTHY = Faults()


def faults_path(script: str) -> Path:
    return Path(os.environ.get(FAULTS_ENV) or Path(script).with_name(FAULTS_FILE))


def _entry(path: Path, node: str) -> Faults | None:
    """The node's faults in one file, None when it has none for this job or is unreadable."""
    try:
        entry = json.loads(path.read_text()).get(node)
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(entry, dict):
        return None
    # A cluster's run directories may start at the account's home (~/portal-runs).
    under = os.path.expanduser(str(entry.get("under", ""))).rstrip("/")
    if under and not os.environ.get("PORTAL_RUN_DIR", "").startswith(under + "/"):
        return None
    try:
        gpus = entry.get("gpus")
        return Faults(
            uncorrected_every_s=float(entry.get("uncorrected_every_s", 0.0)),
            corrected_every_s=float(entry.get("corrected_every_s", 0.0)),
            since=float(entry.get("since", 0.0)),
            retired_pages_pending=str(entry.get("retired_pages_pending", "[N/A]")),
            gpus=None if gpus is None else tuple(int(g) for g in gpus),
        )
    except (TypeError, ValueError):
        return None


def node_faults(path: Path, node: str) -> Faults:
    """The node's faults from the file, else from the first file of the directory beside
    it (`<file>.d/*.json`: one per test, so that tests on several workers do not overwrite
    each other's); healthy when none has an entry for this job or none parses."""
    extra = path.with_name(path.name + ".d")
    for candidate in (path, *sorted(extra.glob("*.json"))):
        found = _entry(candidate, node)
        if found is not None:
            return found
    return HEALTHY


@contextmanager
def faults_written(script_dir: Path, name: str, entries: Mapping[str, object]) -> Iterator[Path]:
    """A test's own faults file in the directory beside the stand-in, removed afterwards."""
    folder = script_dir / (FAULTS_FILE + ".d")
    folder.mkdir(mode=0o755, exist_ok=True)
    folder.chmod(0o755)
    path = folder / f"{name}.json"
    path.write_text(json.dumps(entries))
    path.chmod(0o644)
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)
