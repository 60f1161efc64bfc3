"""The plain `nvidia-smi` table, laid out as driver 580's tool prints it (stdlib only).

The layout was copied from a real H200 (tests/clusters/data/h200_nvidia_smi.txt). The
stand-in's GPUs show no processes: as in most containers, where the tool cannot see
other PID namespaces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

WIDTH = 91  # 41 + 24 + 22 and four bars
CELLS = (41, 24, 22)  # the three columns between the bars
DRIVER = "580.159.04"
CUDA = "13.0"


@dataclass(frozen=True)
class Reading:
    index: int
    name: str
    bus_id: str
    temperature_c: int
    power_w: float
    power_cap_w: float
    memory_used_mib: int
    memory_total_mib: int
    utilization: int


def _box(text: str) -> str:
    return f"|{text:<{WIDTH - 2}}|"


def _row(*cells: str) -> str:
    return "|" + "|".join(f"{c:<{w}}" for c, w in zip(cells, CELLS, strict=True)) + "|"


def _rule() -> str:
    return "+" + "+".join("-" * w for w in CELLS) + "+"


HEADER = [
    "+" + "-" * (WIDTH - 2) + "+",
    _box(f" NVIDIA-SMI {DRIVER:<23}Driver Version: {DRIVER:<15}CUDA Version: {CUDA:<9}"),
    _rule(),
    _row(
        " GPU  Name                 Persistence-M",
        " Bus-Id          Disp.A",
        " Volatile Uncorr. ECC",
    ),
    _row(
        " Fan  Temp   Perf          Pwr:Usage/Cap",
        "           Memory-Usage",
        " GPU-Util  Compute M.",
    ),
    _row("", "", "               MIG M."),
    "|" + "+".join("=" * w for w in CELLS) + "|",
]
PROCESSES = [
    "",
    "+" + "-" * (WIDTH - 2) + "+",
    _box(" Processes:"),
    _box(
        "  GPU   GI   CI              PID   Type   Process name                        GPU Memory"
    ),
    _box("        ID   ID                                                               Usage"),
    "|" + "=" * (WIDTH - 2) + "|",
    _box("  No running processes found"),
    "+" + "-" * (WIDTH - 2) + "+",
]


def render(readings: list[Reading], now: float) -> str:
    # asctime's layout (day padded with a space), then the tool's trailing spaces.
    lines = [time.strftime("%a %b %e %H:%M:%S %Y", time.localtime(now)) + " " * 7, *HEADER]
    for r in readings:
        lines += [
            _row(f"{r.index:>4}  {r.name:<31}On  ", f"{r.bus_id:>19} Off ", f"{'0':>21} "),
            _row(
                f" N/A  {r.temperature_c:>3}C    P0  {r.power_w:>13.0f}W / {r.power_cap_w:>4.0f}W ",
                f"{r.memory_used_mib:>8}MiB / {r.memory_total_mib:>6}MiB ",
                f"{r.utilization:>7}%      Default ",
            ),
            _row("", "", f"{'Disabled':>21} "),
            _rule(),
        ]
    return "\n".join(lines + PROCESSES) + "\n"
