"""Which rank and which node failed first, as torchrun, srun, torch and the kernel print it.

torchrun ends a failed run with a table (`ChildFailedError`): a `Failures:` block
and a `Root Cause (first observed failure):` block, each entry a rank with its
host, exit code and time; with several nodes every agent prints its own table.
The earliest entry is the rank to blame. Line by line, linear.
"""

import re
from dataclasses import dataclass

from monitoring.diagnosis.log_scan import LogTail, body

_ROOT_CAUSE = "Root Cause (first observed failure)"
_ENTRY = re.compile(r"(?:\S+ )?\[\d+\]:")  # `[0]:` (or `0: [0]:` under srun --label)
_FIELD = re.compile(r"\s*(?P<key>time|host|rank|exitcode|error_file|traceback)\s*: ?(?P<value>.*)")
_RANK = re.compile(r"(?P<rank>\d+)(?: \(local_rank: (?P<local>\d+)\))?")
_CODE = re.compile(r"-?\d+")
# The elastic agent's own line, before its table (or alone when the table was cut off).
_AGENT_FAILED = re.compile(
    r"failed \(exitcode: (?P<code>-?\d+)\) local_rank: (?P<local>\d+) \(pid: \d+\)"
)
# srun names the node of each task that failed ("srun: error: n2: task 1: Exited with
# exit code 1"); the first such line is the task that took the job down.
SRUN_TASK = re.compile(
    r"^srun: error: (?P<node>[\w.-]+): tasks? (?P<task>[\d,-]+): "
    r"(?P<how>Exited with exit code (?P<code>\d+)|Killed|Segmentation fault|Aborted"
    r"|[A-Z][\w ]+)",
    re.M,
)
_NODE_FAILURE = re.compile(r"Node failure on (?P<node>[\w.-]+)")
_RANK_IN_LINE = re.compile(r"\bRank (?P<rank>\d+)\]|\[rank(?P<rank2>\d+)\]")
# Where a line names its host: syslog (`Mar 3 04:05:06 gpu07 kernel: NVRM: Xid ...`),
# NCCL (`gpu07:183006:183220 [1] NCCL WARN ...`), `slurmstepd-gpu07:`, srun's task line.
_HOST_IN_LINE = re.compile(
    r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d (?P<syslog>[\w.-]+) kernel:"
    r"|^(?P<nccl>[\w.-]+):\d+:\d+ \[\d+\]"
    r"|slurmstepd-(?P<stepd>[\w.-]+):"
    r"|^srun: error: (?P<srun>[\w.-]+): task"
)


@dataclass(frozen=True)
class FailedRank:
    """One failed worker as the launcher reported it."""

    rank: int | None = None
    local_rank: int | None = None
    host: str = ""
    exit_code: int | None = None
    time: str = ""  # as torchrun prints it (`2025-05-21_15:43:03`), sortable as text
    line: str = ""  # the exit-code line, the evidence of a crash
    root_cause: bool = False


def _entry(lines: list[str], index: int, root_cause: bool) -> FailedRank:
    fields: dict[str, str] = {}
    line = ""
    for after in range(index + 1, min(index + 8, len(lines))):
        found = _FIELD.match(body(lines[after]))  # `0:   host : n1` under srun --label
        if not found:
            break
        fields[found["key"]] = found["value"].strip()
        if found["key"] == "exitcode":
            line = lines[after].strip()
    rank = _RANK.match(fields.get("rank", ""))
    code = _CODE.match(fields.get("exitcode", ""))
    return FailedRank(
        rank=int(rank["rank"]) if rank else None,
        local_rank=int(rank["local"]) if rank and rank["local"] else None,
        host=fields.get("host", ""),
        exit_code=int(code[0]) if code else None,
        time=fields.get("time", ""),
        line=line,
        root_cause=root_cause,
    )


def torchrun_failures(tail: LogTail) -> list[FailedRank]:
    """Every entry of every torchrun failure table in the tail, in log order."""
    entries: list[FailedRank] = []
    root_cause = False
    lines = tail.lines
    for index, line in enumerate(lines):
        if _ROOT_CAUSE in line:
            root_cause = True
        elif line.strip().endswith("Failures:"):
            root_cause = False
        elif len(line) < 40 and _ENTRY.fullmatch(body(line).strip()):
            entry = _entry(lines, index, root_cause)
            if entry.rank is not None or entry.exit_code is not None:
                entries.append(entry)
    return entries


def first_failed(tail: LogTail) -> FailedRank | None:
    """The earliest failed worker: by the table's time, a root cause before other failures;
    without a table, the agent's `failed (exitcode: N) local_rank: N` line."""
    entries = torchrun_failures(tail)
    if entries:
        order = {id(entry): index for index, entry in enumerate(entries)}
        return min(
            entries,
            key=lambda e: (e.time or "~", not e.root_cause, order[id(e)]),
        )
    found = tail.first(_AGENT_FAILED)
    if found is None:
        return None
    agent = _AGENT_FAILED.search(found.line)
    if agent is None:  # the pattern matched this line, so it cannot be
        return None
    return FailedRank(
        local_rank=int(agent["local"]), exit_code=int(agent["code"]), line=found.quote()
    )


def srun_failed_node(text: str) -> str:
    """The node of the first task srun reports as failed (an exit 0 is not a failure)."""
    for match in SRUN_TASK.finditer(text):
        if match["how"].startswith("Exited with exit code") and match["code"] == "0":
            continue
        return match["node"]
    return ""


def node_failure_node(text: str) -> str:
    found = _NODE_FAILURE.search(text)
    return found["node"] if found else ""


def rank_in_line(line: str) -> int | None:
    found = _RANK_IN_LINE.search(line)
    return int(found["rank"] or found["rank2"]) if found else None


def host_in_line(line: str) -> str:
    found = _HOST_IN_LINE.search(body(line.strip()))
    if not found:
        return ""
    return found["syslog"] or found["nccl"] or found["stepd"] or found["srun"] or ""
