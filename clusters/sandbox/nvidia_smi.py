#!/usr/bin/env python3
"""Stand-in for ``nvidia-smi`` on the sandbox cluster (stdlib only).

The sandbox has no GPUs, but the portal parses real ``nvidia-smi --query-gpu``
output, so this script reproduces that format byte for byte (", " between
fields, units unless ``nounits``, ``[N/A]`` for what a GPU cannot report); the
UUID is stable per (node, GPU index) so series can be keyed on it.

Like the real tool it ignores ``CUDA_VISIBLE_DEVICES`` and lists every GPU of
the node. The node comes from ``SLURMD_NODENAME`` (set inside Slurm jobs),
falling back to the host name.

Utilisation is honest: it follows what the processes bound to that GPU do. A process
is bound to GPU ``i`` of node ``N`` when its environment (``/proc/<pid>/environ``) has
``SLURMD_NODENAME=N``, a ``SLURM_JOB_ID`` and ``i`` among its job's GPUs
(``SLURM_STEP_GPUS``, else ``SLURM_JOB_GPUS``, else ``CUDA_VISIBLE_DEVICES``); a torchrun
worker (``LOCAL_RANK``) only to the job's ``LOCAL_RANK``-th GPU of the node. The time the
bound processes wanted the CPU between two samples (``/proc/<pid>/schedstat``: on it or
in the run queue), per second of wall time, is the GPU's busy share, so a computing job
reads busy however busy the machine is; power, temperature and SM clock follow it;
memory is a plausible value while a process is bound. An unbound GPU reads 0 %, as a
free GPU does. Stand-in processes themselves are never counted.

Test hooks: ``PORTAL_FAKE_NVSMI_NA=power.draw,clocks.sm`` makes those fields ``[N/A]``;
a faults file beside the script makes a node's GPUs report ECC errors
(``nvidia_smi_faults``).
"""

from __future__ import annotations

import hashlib
import math
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from dataclasses import field as dc_field

try:
    from . import nvidia_smi_faults as faults
    from . import nvidia_smi_summary as summary
    from .nvidia_smi_args import USAGE, UsageError, parse_args
except ImportError:  # installed as a script, the modules beside it (clusters/sandbox/system.py)
    import nvidia_smi_faults as faults  # type: ignore[no-redef,import-not-found]
    import nvidia_smi_summary as summary  # type: ignore[no-redef,import-not-found]
    from nvidia_smi_args import (  # type: ignore[import-not-found,no-redef]
        USAGE,
        UsageError,
        parse_args,
    )

# Every sandbox node has this many; clusters.sandbox.config takes it from here.
GPUS_PER_NODE = 2
GPU_NAME = "NVIDIA H200"
MEMORY_TOTAL_MIB = 143771
POWER_LIMIT_W = 700.0
NA = "[N/A]"
FIRST_WINDOW_S = 0.2


@dataclass(frozen=True)
class Gpu:
    node: str
    index: int
    # Share of the last sampling interval its bound processes computed (see the docstring).
    busy: float = dc_field(default=0.0, compare=False)
    bound: bool = dc_field(default=False, compare=False)  # any process bound to it
    faults: faults.Faults = dc_field(default=faults.HEALTHY, compare=False)

    @property
    def seed(self) -> int:
        digest = hashlib.sha256(f"{self.node}/{self.index}".encode()).digest()
        return int.from_bytes(digest[:4], "big")

    @property
    def uuid(self) -> str:
        h = hashlib.sha256(f"sandbox-gpu:{self.node}:{self.index}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    @property
    def bus_id(self) -> str:  # distinct buses, as real boards; the numbers don't matter
        return f"00000000:{0x19 + 0x20 * self.index:02X}:00.0"

    def utilization(self, now: float) -> int:
        return utilization_percent(self.busy)

    def memory_used(self, now: float) -> int:
        if not self.bound:
            return 0
        base = 20000 + self.seed % 60000
        return min(MEMORY_TOTAL_MIB, base + round(3000 * math.sin(now / 31.0)))

    def temperature(self, now: float) -> int:
        return max(30, min(85, 34 + self.utilization(now) * 45 // 100))

    def power_draw(self, now: float) -> float:
        jitter = ((self.seed + int(now * 10)) % 997) / 997 * 8
        return min(POWER_LIMIT_W, 75.0 + self.utilization(now) * 5.6 + jitter)

    def sm_clock(self, now: float) -> int:
        return 345 if self.utilization(now) < 5 else 1980


def utilization_percent(busy: float) -> int:
    """A GPU's utilisation from its bound processes' runnable seconds per wall second."""
    return max(0, min(100, round(busy * 100)))


def _gpu_list(value: str) -> list[int]:
    return [int(part) for part in value.split(",") if part.strip().isdigit()]


def bound_gpus(environ: dict[str, str], node: str) -> list[int]:
    """The GPUs of `node` a process with this environment works on (see the docstring)."""
    if environ.get("SLURMD_NODENAME") != node or not environ.get("SLURM_JOB_ID"):
        return []
    gpus: list[int] = []
    for key in ("SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES"):
        gpus = _gpu_list(environ.get(key, ""))
        if gpus:
            break
    local = environ.get("LOCAL_RANK", "")
    if gpus and local.isdigit():
        return [gpus[int(local) % len(gpus)]]
    return gpus


class ProcessTable:
    """Runnable time of the processes bound to this node's GPUs, read from /proc between samples."""

    def __init__(self, node: str, proc: str = "/proc") -> None:
        self.node = node
        self.proc = proc
        self.ticks_per_s = float(os.sysconf("SC_CLK_TCK"))
        self._binding: dict[tuple[int, str], list[int]] = {}  # (pid, start time) -> GPUs
        self._last: dict[tuple[int, str], tuple[int, float]] = {}  # runnable ns, read at
        self._last_time = 0.0

    def _read(self, pid: int) -> tuple[tuple[int, str], int, list[int]] | None:
        try:
            with open(f"{self.proc}/{pid}/stat", "rb") as fh:
                stat = fh.read().decode("ascii", "replace")
            fields = stat[stat.rindex(")") + 2 :].split()
            # The name changes on exec (a forked child becoming a torchrun worker, new env).
            key = (pid, fields[19] + stat[: stat.rindex(")")])
            ticks = self._runnable_ns(pid, int(fields[11]) + int(fields[12]))
        except (OSError, ValueError, IndexError):
            return None  # gone
        if key not in self._binding:
            self._binding[key] = self._bind(pid)
        return key, ticks, self._binding[key]

    def _runnable_ns(self, pid: int, cpu_ticks: int) -> int:
        try:  # on a CPU or waiting for one; CPU time alone without schedstat
            with open(f"{self.proc}/{pid}/schedstat", "rb") as fh:
                return sum(int(ns) for ns in fh.read().split()[:2])
        except (OSError, ValueError):
            return int(cpu_ticks * 1e9 / self.ticks_per_s)

    def _bind(self, pid: int) -> list[int]:
        try:
            with open(f"{self.proc}/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
            with open(f"{self.proc}/{pid}/environ", "rb") as fh:
                raw = fh.read()
        except OSError:
            return []  # another user's process: not ours to see
        if b"nvidia-smi" in cmdline or b"nvidia_smi" in cmdline or pid == os.getpid():
            return []
        pairs = (item.partition(b"=") for item in raw.split(b"\0") if item)
        environ = {k.decode(errors="replace"): v.decode(errors="replace") for k, _, v in pairs}
        return bound_gpus(environ, self.node)

    def sample(self, now: float) -> dict[int, float]:
        """Each bound GPU's busy share since the previous sample (unbound GPUs are absent)."""
        current: dict[tuple[int, str], tuple[int, float]] = {}
        spent: dict[int, float] = {}
        bound: set[int] = set()
        for name in os.listdir(self.proc):
            if not name.isdigit():
                continue
            found = self._read(int(name))
            if found is None or not found[2]:
                continue
            key, ticks, gpus = found
            # Each process's own read time: a slow scan of /proc (a busy machine) would
            # misjudge a process read late in one scan and early in the next.
            read_at = time.monotonic()
            current[key] = (ticks, read_at)
            bound.update(gpus)
            last = self._last.get(key) if self._last_time else None
            if last is None or read_at <= last[1]:
                share = 0.0
            else:
                share = max(ticks - last[0], 0) / 1e9 / (read_at - last[1])
            for gpu in gpus:
                spent[gpu] = spent.get(gpu, 0.0) + share
        self._last, self._last_time = current, now
        return {g: spent.get(g, 0.0) for g in bound}


def with_activity(
    gpus: list[Gpu], activity: dict[int, float], node: faults.Faults = faults.HEALTHY
) -> list[Gpu]:
    return [
        replace(g, busy=activity.get(g.index, 0.0), bound=g.index in activity, faults=node)
        for g in gpus
    ]


@dataclass(frozen=True)
class Field:
    unit: str  # appended as " <unit>" unless nounits; also shown in the header
    value: Callable[[Gpu, float], str]


def _timestamp(now: float) -> str:
    millis = int(now * 1000) % 1000
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{millis:03d}"


FIELDS: dict[str, Field] = {
    "timestamp": Field("", lambda g, t: _timestamp(t)),
    "driver_version": Field("", lambda g, t: summary.DRIVER),
    "count": Field("", lambda g, t: str(GPUS_PER_NODE)),
    "index": Field("", lambda g, t: str(g.index)),
    "uuid": Field("", lambda g, t: g.uuid),
    "name": Field("", lambda g, t: GPU_NAME),
    "pci.bus_id": Field("", lambda g, t: g.bus_id),
    "utilization.gpu": Field("%", lambda g, t: str(g.utilization(t))),
    "utilization.memory": Field("%", lambda g, t: str(g.utilization(t) * 3 // 5)),
    "memory.total": Field("MiB", lambda g, t: str(MEMORY_TOTAL_MIB)),
    "memory.used": Field("MiB", lambda g, t: str(g.memory_used(t))),
    "memory.free": Field("MiB", lambda g, t: str(MEMORY_TOTAL_MIB - g.memory_used(t))),
    "temperature.gpu": Field("", lambda g, t: str(g.temperature(t))),
    "power.draw": Field("W", lambda g, t: f"{g.power_draw(t):.2f}"),
    "power.limit": Field("W", lambda g, t: f"{POWER_LIMIT_W:.2f}"),
    "clocks.sm": Field("MHz", lambda g, t: str(g.sm_clock(t))),
    "clocks.max.sm": Field("MHz", lambda g, t: "1980"),
    "ecc.errors.uncorrected.volatile.total": Field(
        "", lambda g, t: str(g.faults.uncorrected(g.index, t))
    ),
    "ecc.errors.corrected.volatile.total": Field(
        "", lambda g, t: str(g.faults.corrected(g.index, t))
    ),
    "retired_pages.pending": Field("", lambda g, t: g.faults.pending(g.index)),
}
# The real tool accepts these spellings too and echoes them in the header.
ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "clocks.current.sm": "clocks.sm",
    "clocks.max.sm": "clocks.max.sm",
}


def node_name() -> str:
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]


def _select(gpus: list[Gpu], ids: list[str] | None) -> list[Gpu]:
    if ids is None:
        return gpus
    chosen: list[Gpu] = []
    for ident in ids:
        match = [g for g in gpus if ident in (str(g.index), g.uuid, g.bus_id)]
        if not match:
            raise UsageError("No devices were found", 6)
        chosen.extend(g for g in match if g not in chosen)
    return chosen


def _resolve_fields(names: list[str]) -> list[tuple[str, Field]]:
    resolved = []
    for name in names:
        key = ALIASES.get(name, name)
        if key not in FIELDS:
            raise UsageError(f'Field "{name}" is not a valid field to query.\n', 2)
        resolved.append((name, FIELDS[key]))
    return resolved


def render_query(
    gpus: list[Gpu], fields: list[tuple[str, Field]], fmt: set[str], now: float, header: bool
) -> str:
    units = "nounits" not in fmt
    na_fields = {f.strip() for f in os.environ.get("PORTAL_FAKE_NVSMI_NA", "").split(",")}
    lines = []
    if header:
        lines.append(", ".join(f"{n} [{f.unit}]" if f.unit else n for n, f in fields))
    for gpu in gpus:
        cells = []
        for name, field in fields:
            if name in na_fields or ALIASES.get(name, name) in na_fields:
                cells.append(NA)  # no unit after [N/A], even without nounits
            elif units and field.unit:
                value = field.value(gpu, now)
                # The real tool writes "87 %" with a space, like the other units.
                cells.append(f"{value} {field.unit}")
            else:
                cells.append(field.value(gpu, now))
        lines.append(", ".join(cells))
    return "\n".join(lines) + "\n"


def render_summary(gpus: list[Gpu], now: float) -> str:
    return summary.render(
        [
            summary.Reading(
                g.index,
                GPU_NAME,
                g.bus_id,
                g.temperature(now),
                g.power_draw(now),
                POWER_LIMIT_W,
                g.memory_used(now),
                MEMORY_TOTAL_MIB,
                g.utilization(now),
            )
            for g in gpus
        ],
        now,
    )


def run(argv: list[str], write: Callable[[str], None]) -> int:
    opts = parse_args(argv)
    if opts.help:
        write(USAGE)
        return 0
    gpus = _select([Gpu(node_name(), i) for i in range(GPUS_PER_NODE)], opts.ids)
    if opts.list_gpus:
        write("".join(f"GPU {g.index}: {GPU_NAME} (UUID: {g.uuid})\n" for g in gpus))
        return 0
    fields = _resolve_fields(opts.query) if opts.query is not None else None
    fmt = opts.fmt or set()
    if fields is not None and "csv" not in fmt:
        raise UsageError('"--format" must be specified with "--query-gpu" (e.g. csv).', 2)
    table = ProcessTable(node_name())
    faults_file = faults.faults_path(__file__)
    table.sample(time.time())
    time.sleep(FIRST_WINDOW_S)  # the first line needs an interval too
    first = True
    while True:
        now = time.time()
        node = faults.node_faults(faults_file, node_name())
        gpus = with_activity(gpus, table.sample(now), node)
        if fields is not None:
            # With -l the real tool repeats the header only once.
            header = first and "noheader" not in fmt
            write(render_query(gpus, fields, fmt, now, header))
        else:
            write(render_summary(gpus, now))
        first = False
        if opts.loop_s is None:
            return 0
        time.sleep(max(opts.loop_s - (time.time() - now), 0.0))


def main() -> int:
    # Killed by the portal's poller with SIGTERM/SIGINT: exit quietly like the real tool.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    def write(text: str) -> None:
        sys.stdout.write(text)
        sys.stdout.flush()  # each -l batch must reach a pipe reader immediately

    try:
        return run(sys.argv[1:], write)
    except UsageError as exc:
        sys.stdout.write(str(exc) + "\n")
        return exc.code
    except (KeyboardInterrupt, BrokenPipeError):
        return 0


if __name__ == "__main__":
    sys.exit(main())
