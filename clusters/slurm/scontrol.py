"""Pure parsers for what `scontrol --oneliner show partition|node` prints: the cluster's
partitions and nodes (clusters.slurm.parsers reads the jobs' squeue and sacct)."""

import re
from dataclasses import dataclass
from datetime import timedelta

from clusters.slurm.errors import SlurmOutputError
from clusters.slurm.parsers import _NO_NODES, gpus_from_gres, gpus_from_tres, parse_time_limit

_SCONTROL_KEY = re.compile(r"([A-Za-z][\w/:.\-]*)=(.*)")
_UNAVAILABLE_NODE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "FUTURE",
        "INVAL",
        "MAINT",
        "NOT_RESPONDING",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "REBOOT_ISSUED",
        "RESERVED",
        "UNKNOWN",
    }
)


@dataclass(frozen=True)
class Partition:
    name: str
    is_default: bool
    state: str
    max_time: timedelta | None  # None: no limit
    default_time: timedelta | None
    nodes: str  # a Slurm hostlist, e.g. n[1-2]
    total_nodes: int


@dataclass(frozen=True)
class Node:
    name: str
    state: str  # as Slurm prints it, e.g. MIXED or IDLE+DRAIN
    cpus: int
    memory_mb: int
    gpus: int
    gpus_used: int
    partitions: tuple[str, ...]
    reason: str
    cpus_used: int = 0  # CPUAlloc
    memory_used_mb: int = 0  # AllocMem

    @property
    def is_available(self) -> bool:
        """Whether the scheduler may start new jobs here."""
        words = set(re.split(r"[+\s]", self.state.rstrip("*~#!%$@^-")))
        return not self.state.endswith("*") and not words & _UNAVAILABLE_NODE_STATES

    @property
    def free_gpus(self) -> int:
        return max(self.gpus - self.gpus_used, 0) if self.is_available else 0


def parse_scontrol_line(line: str) -> dict[str, str]:
    """`Key=value Key=value` as printed by `scontrol --oneliner`; values may hold spaces."""
    values: dict[str, str] = {}
    key = ""
    for token in line.split():
        match = _SCONTROL_KEY.fullmatch(token)
        if match:
            key = match[1]
            values[key] = match[2]
        elif key:  # a value with spaces in it, e.g. OS=Linux 6.1 #1 SMP
            values[key] += " " + token
    return values


def _scontrol_records(text: str, first_key: str, command: str) -> list[dict[str, str]]:
    records = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = parse_scontrol_line(line)
        if first_key not in values:
            raise SlurmOutputError(command, f"expected {first_key}=... in {line[:300]!r}")
        records.append(values)
    return records


def parse_partitions(text: str) -> list[Partition]:
    """Partitions from `scontrol --oneliner show partition`."""
    command = "scontrol show partition"
    partitions = []
    for values in _scontrol_records(text, "PartitionName", command):
        try:
            partitions.append(
                Partition(
                    name=values["PartitionName"],
                    is_default=values.get("Default") == "YES",
                    state=values.get("State", ""),
                    max_time=parse_time_limit(values.get("MaxTime", "")),
                    default_time=parse_time_limit(values.get("DefaultTime", "")),
                    nodes="" if values.get("Nodes", "") in _NO_NODES else values["Nodes"],
                    total_nodes=int(values.get("TotalNodes", "0")),
                )
            )
        except ValueError as exc:
            raise SlurmOutputError(command, f"{exc} for {values['PartitionName']}") from exc
    return partitions


def parse_nodes(text: str) -> list[Node]:
    """Nodes from `scontrol --oneliner --details show node` (--details adds GresUsed)."""
    command = "scontrol show node"
    nodes = []
    for values in _scontrol_records(text, "NodeName", command):
        if "GresUsed" in values:
            used = gpus_from_gres(values["GresUsed"])
        else:
            used = gpus_from_tres(values.get("AllocTRES", ""))
        partitions = values.get("Partitions", "")
        try:
            nodes.append(
                Node(
                    name=values["NodeName"],
                    state=values.get("State", ""),
                    cpus=int(values.get("CPUTot", "0")),
                    memory_mb=int(values.get("RealMemory", "0")),
                    gpus=gpus_from_gres(values.get("Gres", "")),
                    gpus_used=used,
                    partitions=tuple(p for p in partitions.split(",") if p and p != "(null)"),
                    reason=values.get("Reason", ""),
                    cpus_used=int(values.get("CPUAlloc", "0")),
                    memory_used_mb=int(values.get("AllocMem", "0")),
                )
            )
        except ValueError as exc:
            raise SlurmOutputError(command, f"{exc} for node {values['NodeName']}") from exc
    return nodes
