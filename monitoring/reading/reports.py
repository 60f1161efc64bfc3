"""Error reports among training output: their numbers are no metrics. Pure."""

from __future__ import annotations

import re

# A line of an error report is no training line, whatever numbers it holds: a traceback's
# frames, an exception, a process's exit code or signal (torchrun's ChildFailedError table,
# srun's and slurmstepd's own messages), a record at error level (logging, glog, c10's
# `[E ProcessGroupNCCL.cpp:475]`). Their numbers (`line 12`, `exitcode: -9`, `pid 5678`,
# `SeqNum=1`) would otherwise be read as metrics of the last step. Only what comes before
# it on the line is read: a progress bar the error was printed onto stays.
ERROR_REPORT = re.compile(
    r"\(most recent call (?:last|first)\)|\bException raised from\b|\bterminate called after"
    r'|\bFile "[^"\n]*", line \d+'
    r"|\b[A-Z]\w*(?:Error|Exception|Failure)\b:"
    r"|\b(?:exitcode|exit code|exit status)\b"
    r"|\breceived by PID\b|\bSignal \d+ \(SIG"
    r"|^(?:srun|slurmstepd|salloc|sbatch)(?:-[\w.-]+)?(?::|\[| error)|: error: "
    r"|\b(?:ERROR|CRITICAL|FATAL)\b"
    r"|(?:^|\[)[EF]\d{3,4} \d\d:\d\d:\d\d|\[[EF] [\w.-]+:\d+\]"
)
# Text every ERROR_REPORT match holds: a line with none of it is no report (a cheap first test).
_REPORT_HINTS = (
    "most recent call", "Exception", "terminate called", 'File "', "Error", "Failure", "exit",
    "received by PID", "Signal ", ": error: ", "ERROR", "CRITICAL", "FATAL", "[E", "[F",
)  # fmt: skip
_REPORT_STARTS = ("srun", "slurmstepd", "salloc", "sbatch", "E", "F")


def error_report(text: str) -> re.Match[str] | None:
    """Where an error report begins on the line, or None."""
    if text.startswith(_REPORT_STARTS) or any(hint in text for hint in _REPORT_HINTS):
        return ERROR_REPORT.search(text)
    return None
