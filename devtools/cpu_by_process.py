#!/usr/bin/env python3
"""Where a command's CPU goes, by kind: `python3 devtools/cpu_by_process.py -- make test`.

`--top N` before the `--` also lists the N command lines (numbers blanked) that took most.

Reads /proc twice a second while the command runs and adds up each process's user and
system time by what its command line says it is (an xdist worker, a Celery worker, a
torch rank, Chromium, a PostgreSQL backend...). A process that lives less than half a
second can be missed (its CPU, and the last half second of any other); the kernel's total
for the command's whole process tree and the machine's (/proc/stat) are printed beside the
sum so that the gap shows. Processes that were running before the command count from then on.
Stdlib only: it runs before `.venv` exists.
"""

import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
# First match wins: (kind, a piece of the command line).
KINDS = [
    ("pytest xdist worker", "sys.stdin.readline"),
    ("celery", "celery"),
    ("daphne", "daphne"),
    ("torch rank or torchrun", "ddp_train"),
    ("torchrun", "torchrun"),
    ("chromium", "chrom"),
    ("postgres backend", "postgres:"),
    ("postgres", "postgres"),
    ("slurm", "slurm"),
    ("sshd", "sshd"),
    ("redis", "redis-server"),
    ("nvidia-smi stand-in", "nvidia"),
    ("playwright driver", "playwright"),
    ("bench script", "bench/"),
    ("other python", "python"),
]


def kind_of(command: str) -> str:
    return next((kind for kind, piece in KINDS if piece in command), "other")


def _processes() -> dict[tuple[str, str], tuple[str, float]]:
    """(pid, start time) -> (command line, CPU seconds so far) of every process."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, UnicodeDecodeError):
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        cpu = (int(fields[11]) + int(fields[12])) / TICK
        found[(pid, fields[19])] = (command or f"[{name}]", cpu)
    return found


def _update(
    seen: dict[tuple[str, str], tuple[str, float]], now: dict[tuple[str, str], tuple[str, float]]
) -> None:
    """The new CPU counts, under the command line first seen: an exited process not yet
    waited for (a zombie) has none left, only its name in brackets."""
    for key, (command, cpu) in now.items():
        earlier = seen.get(key)
        seen[key] = (earlier[0] if earlier and command.startswith("[") else command, cpu)


def _machine_busy() -> float:
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICK  # all but idle and iowait


def _shape(command: str) -> str:
    """A command line with its numbers and temporary names blanked, so that like adds to like."""
    words = re.sub(r"\d+", "N", command).split()
    return " ".join(words[:6])[:110]


def main(command: list[str], top: int = 0) -> int:
    before = {key: cpu for key, (_, cpu) in _processes().items()}
    busy_before, started = _machine_busy(), time.monotonic()
    seen: dict[tuple[str, str], tuple[str, float]] = {}
    child = subprocess.Popen(command)
    while child.poll() is None:
        _update(seen, _processes())
        time.sleep(0.5)
    _update(seen, _processes())
    by_kind: dict[str, float] = {}
    count: Counter[str] = Counter()
    by_shape: dict[str, float] = {}
    for key, (line, cpu) in seen.items():
        if key[0] == str(os.getpid()):
            continue
        kind = kind_of(line)
        by_kind[kind] = by_kind.get(kind, 0.0) + cpu - before.get(key, 0.0)
        shape = _shape(line)
        by_shape[shape] = by_shape.get(shape, 0.0) + cpu - before.get(key, 0.0)
        count[kind] += 1
    wall = time.monotonic() - started
    print(f"\nCPU by kind of process over {wall:.0f} s (processes seen):", file=sys.stderr)
    for kind, cpu in sorted(by_kind.items(), key=lambda item: -item[1]):
        print(f"{cpu:9.1f} s  {count[kind]:6d}  {kind}", file=sys.stderr)
    if top:
        print(f"\nThe {top} heaviest command lines (numbers as N):", file=sys.stderr)
        for shape, cpu in sorted(by_shape.items(), key=lambda item: -item[1])[:top]:
            print(f"{cpu:9.1f} s  {shape}", file=sys.stderr)
    total = _machine_busy() - busy_before
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # every descendant waited for
    tree = usage.ru_utime + usage.ru_stime
    print(
        f"{sum(by_kind.values()):9.1f} s in all; the command's processes: {tree:.1f} s;"
        f" the machine: {total:.1f} s",
        file=sys.stderr,
    )
    return child.returncode


if __name__ == "__main__":
    arguments = sys.argv[1:]
    top = 0
    if arguments[:1] == ["--top"] and len(arguments) > 1:
        top, arguments = int(arguments[1]), arguments[2:]
    if arguments[:1] == ["--"]:
        arguments = arguments[1:]
    if not arguments:
        sys.exit(__doc__)
    sys.exit(main(arguments, top))
